"""Grouped query heads drawn as groups: the query heads that share one key/value head get shades of one colour, and
the model view frames each group's columns under its key/value head's label."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale

from ..trace import AttentionTrace

GROUP_SCALES = ("Blues", "Oranges", "Greens", "Reds", "Purples", "Greys", "YlOrBr", "PuRd")


def kv_heads(trace: AttentionTrace) -> list[int] | None:
    """The 0-based key/value head each query head reads (the trace's record), None where every head has its own."""
    groups = trace.settings.get("kv_heads")
    return None if not groups or len(set(groups)) == len(groups) else [int(g) for g in groups]


def kv_groups(groups: Sequence[int]) -> dict[int, list[int]]:
    """Key/value head -> the 0-based query heads that read it, in order."""
    members: dict[int, list[int]] = {}
    for head, group in enumerate(groups):
        members.setdefault(int(group), []).append(head)
    return members


def group_colors(groups: Sequence[int]) -> list[str]:
    """One colour per query head: the heads of one key/value head in shades of that group's hue, darkest first."""
    colors = [""] * len(groups)
    for group, heads in kv_groups(groups).items():
        scale = GROUP_SCALES[group % len(GROUP_SCALES)]
        shades = [0.9] if len(heads) == 1 else [0.95 - 0.4 * i / (len(heads) - 1) for i in range(len(heads))]
        for head, color in zip(heads, sample_colorscale(scale, shades)):
            colors[head] = color
    return colors


def group_names(groups: Sequence[int]) -> list[str]:
    """The head view's legend names: "head 3 · kv 2" (1-based)."""
    return [f"head {h + 1} · kv {g + 1}" for h, g in enumerate(groups)]


def frame_groups(fig: go.Figure, trace: AttentionTrace, kind: str = "decoder") -> go.Figure:
    """A `map_figures.model_view` of every head with each key/value head's query heads framed in one colour and
    its columns labelled "H3 · kv 2" (nothing changes without grouped heads)."""
    groups = kv_heads(trace)
    if groups is None:
        return fig
    maps = trace.attentions(kind)
    layers, (q, k) = len(maps), maps[0].shape[1:]
    tile_w, tile_h = k + 1, q + 1
    palette = qualitative.Dark2
    for group, heads in kv_groups(groups).items():
        first, last = min(heads), max(heads)
        fig.add_shape(type="rect", x0=first * tile_w - 0.45, x1=last * tile_w + k - 0.55, y0=-0.45,
                      y1=layers * tile_h - 1.55, line=dict(color=palette[group % len(palette)], width=3),
                      name=f"kv head {group + 1}")
    fig.update_xaxes(ticktext=[f"H{h + 1}<br>kv {g + 1}" for h, g in enumerate(groups)])
    title = fig.layout.title.text or ""
    fig.update_layout(title=dict(text=f"{title} · framed by shared key/value head", y=0.99, yanchor="top"),
                      margin=dict(t=110))
    return fig
