"""Sliding-window layers drawn windowed: the edge of the band a query sees (its last W keys) on a layer's map, and
each layer's window on the model view."""

from __future__ import annotations

import plotly.graph_objects as go

from ..trace import AttentionTrace

WINDOW_COLOR = "#9467bd"  # the window's edge on every map


def windows(trace: AttentionTrace) -> list[int | None]:
    """Each layer's sliding window (None: the layer sees every earlier token), the trace's record."""
    recorded = trace.settings.get("windows") or [None] * trace.num_layers["decoder"]
    return [None if w is None else int(w) for w in recorded]


def window_note(window: int | None, n: int) -> str:
    """One line saying what a layer's window hides from `n` tokens."""
    if window is None:
        return "This layer sees every earlier token (no sliding window)."
    if window >= n:
        return (f"This layer has a sliding window of {window} tokens: query t sees keys t − {window - 1} … t, which "
                f"covers all {n} tokens here, so the window cuts nothing yet.")
    return (f"This layer has a sliding window of {window} tokens: query t sees keys t − {window - 1} … t only. The "
            f"purple steps mark the window's left edge; the cells left of them are masked (weight 0).")


def window_edge(window: int, n: int, dx: float = 0.0, dy: float = 0.0) -> tuple[list[float | None], list[float | None]]:
    """The staircase left of the keys each query of an ``n x n`` map sees (query i: keys i - window + 1 … i), as x
    and y coordinates from the map's cell (0, 0) at (`dx`, `dy`); empty where the window cuts nothing."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i in range(window, n):
        x = i - window + 0.5 + dx
        xs += [x, x]
        ys += [i - 0.5 + dy, i + 0.5 + dy]
        if i + 1 < n:
            xs.append(x + 1)
            ys.append(i + 0.5 + dy)
    return xs, ys


def mark_window(fig: go.Figure, window: int | None, n: int) -> go.Figure:
    """A self-attention map of `n` tokens (piece level) with its sliding window's edge drawn (none: unchanged)."""
    if window is None or window >= n:
        return fig
    xs, ys = window_edge(window, n)
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=WINDOW_COLOR, width=2.5), hoverinfo="skip",
                             name=f"window of {window}", showlegend=False))
    return fig


def windowed_model_view(fig: go.Figure, trace: AttentionTrace, heads: int) -> go.Figure:
    """A `map_figures.model_view` of decoder self-attention (`heads` columns) with each sliding layer's window edge
    on its maps and its window in the layer's label (unchanged where no layer slides)."""
    per_layer = windows(trace)
    if not any(w is not None for w in per_layer):
        return fig
    n = len(trace.target_tokens)
    tile = n + 1
    xs: list[float | None] = []
    ys: list[float | None] = []
    for layer, window in enumerate(per_layer):
        for column in range(heads if window is not None and window < n else 0):
            x, y = window_edge(window, n, column * tile, layer * tile)  # type: ignore[arg-type]
            xs += [*x, None]
            ys += [*y, None]
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=WINDOW_COLOR, width=1.5),
                                 hoverinfo="skip", name="sliding window", showlegend=False))
    fig.update_yaxes(ticktext=[f"L{i + 1}" + ("" if w is None else f"<br>window {w}") for i, w in enumerate(per_layer)])
    return fig

