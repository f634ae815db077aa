"""The Masks page's figures: a batch's padding mask, a boolean mask matrix, and a head's scores step by step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.layer_scores import LayerScores
from ..nn.kinds import KIND_TITLES
from .figure_style import WEIGHT_SCALE, _font_px, _row_px, _token_axis, escape

# --- masks -------------------------------------------------------------------------------------------------------
PAD_LABEL_CHARS = 10  # a token written in a padding-mask cell is cut to this many characters (hover: in full)
PAD_LABEL_MAX_POSITIONS = 48  # wider batches show their tokens on hover only


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "…"


def padding_mask_figure(tokens: Sequence[Sequence[str]], mask: np.ndarray, title: str) -> go.Figure:
    """The ``(batch, length)`` padding mask: 1 = real token (may be attended), 0 = ``<pad>`` (never attended).
    Each cell's token is written upright (rotated, cut to a few characters) so neighbours never run together."""
    return _token_rows(tokens, np.asarray(mask, dtype=bool), title, ["#d9d9d9", "#9ecae1"],
                       "mask %{z} (1 = may attend)", "sentence", "sentence in the batch")


def token_type_figure(tokens: Sequence[str], type_ids: Sequence[int], title: str) -> go.Figure:
    """An encoder's token types of a pair, one cell a token: 0 = sentence A, 1 = sentence B (written upright as
    `padding_mask_figure` writes its tokens)."""
    return _token_rows([tokens], np.asarray([type_ids]) > 0, title, ["#fdd0a2", "#a1d99b"],
                       "token type %{z} (0 = sentence A, 1 = sentence B)", "pair", "the pair")


def _token_rows(tokens: Sequence[Sequence[str]], values: np.ndarray, title: str, colors: list[str], what: str,
                row_noun: str, rows_title: str) -> go.Figure:
    """A ``(rows, length)`` grid of 0/1 `values` in two `colors`, each cell's token written upright (hover: the
    `row_noun`, the position, the token and `what` the value means)."""
    rows, length = values.shape
    text = [[escape(t) for t in row] for row in tokens]
    fig = go.Figure(go.Heatmap(
        z=values.astype(np.float32), customdata=text, colorscale=[[0, colors[0]], [1, colors[1]]], zmin=0, zmax=1,
        showscale=False, xgap=2, ygap=2,
        hovertemplate=f"{row_noun} %{{y}}, position %{{x}}<br>token %{{customdata}}<br>{what}<extra></extra>"))
    if length <= PAD_LABEL_MAX_POSITIONS:
        fig.update_layout(annotations=[
            dict(x=x, y=y, text=escape(_cut(str(token), PAD_LABEL_CHARS)), textangle=-90, showarrow=False,
                 font=dict(size=11))
            for y, row in enumerate(tokens) for x, token in enumerate(row)])
    fig.update_layout(
        title=dict(text=escape(title)), height=160 + 100 * rows, margin=dict(l=10, r=10, t=60, b=10),
        xaxis=dict(title=dict(text="key position"), tickmode="linear", tick0=0, dtick=1 if length <= 30 else 5,
                   showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text=rows_title), tickmode="array", tickvals=list(range(rows)),
                   ticktext=[f"#{i + 1}" for i in range(rows)], autorange="reversed", showgrid=False,
                   zeroline=False),
        plot_bgcolor="rgba(0,0,0,0)")
    return fig


def mask_matrix_figure(mask: np.ndarray, query_labels: Sequence[str], key_labels: Sequence[str],
                       title: str) -> go.Figure:
    """A ``(q, k)`` boolean mask: blue = may attend, grey = masked (its score becomes -inf)."""
    mask = np.asarray(mask, dtype=bool)
    q, k = mask.shape
    fig = go.Figure(go.Heatmap(
        z=mask.astype(np.float32), x=list(range(k)), y=list(range(q)),
        text=[["" if v else "−∞" for v in row] for row in mask], texttemplate="%{text}",
        colorscale=[[0, "#d9d9d9"], [1, "#3182bd"]], zmin=0, zmax=1, showscale=False, xgap=1, ygap=1,
        hovertemplate="query %{y} → key %{x}: %{z} (1 = may attend, 0 = masked)<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=max(320, 150 + _row_px(q) * q),
                      xaxis=_token_axis(key_labels, "keys"), yaxis=_token_axis(query_labels, "queries", reverse=True),
                      margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)")
    fig.update_xaxes(tickangle=-45 if k > 12 else 0)
    return fig


def score_steps_figure(scores: LayerScores, row: int, head: int, query_labels: Sequence[str],
                       key_labels: Sequence[str]) -> go.Figure:
    """For one sentence of the batch and one head: Q·Kᵀ, ÷√d_k, masked (-inf), softmax, side by side."""
    if not 0 <= row < scores.raw.shape[0]:
        raise ValueError(f"batch row {row} is out of range (the batch has {scores.raw.shape[0]} sentences)")
    if not 0 <= head < scores.raw.shape[1]:
        raise ValueError(f"head {head} is out of range (the layer has {scores.raw.shape[1]} heads)")
    raw, scaled = scores.raw[row, head], scores.scaled[row, head]
    mask, weights = scores.mask[row], scores.weights[row, head]
    masked = np.where(mask, scaled, np.nan)
    titles = ["1. Q·Kᵀ (raw scores)", f"2. ÷ √d_k = ÷ √{scores.d_k}", "3. masked (−∞ where not allowed)",
              "4. softmax (weights)"]
    fig = make_subplots(rows=1, cols=4, subplot_titles=titles, horizontal_spacing=0.045, shared_yaxes=True)
    q, k = raw.shape
    panels = [(raw, "RdBu_r", None), (scaled, "RdBu_r", None), (masked, "RdBu_r", None), (weights, WEIGHT_SCALE, 1.0)]
    finite = np.abs(scaled[np.isfinite(scaled)]).max() if np.isfinite(scaled).any() else 1.0
    for c, (z, scale, zmax) in enumerate(panels, start=1):
        text = None
        if c == 3:
            text = [["−∞" if not mask[i, j] else "" for j in range(k)] for i in range(q)]
        custom = [[("−∞ (masked)" if c == 3 and not mask[i, j] else f"{z[i, j]:.6f}") for j in range(k)]
                  for i in range(q)]
        bound = float(np.abs(raw).max()) if c == 1 else float(finite)
        domain_start = (c - 1) / 4
        fig.add_trace(go.Heatmap(
            z=z, x=list(range(k)), y=list(range(q)), colorscale=scale, text=text,
            texttemplate="%{text}" if text is not None else None, customdata=custom,
            zmin=0.0 if zmax else -bound, zmax=zmax if zmax else bound, xgap=1, ygap=1,
            colorbar=dict(orientation="h", x=domain_start + 0.11, y=-0.18, len=0.2, thickness=10, yanchor="top"),
            hovertemplate="query %{y} → key %{x}<br>%{customdata}<extra></extra>", name=titles[c - 1]), row=1, col=c)
        fig.update_xaxes(tickmode="array", tickvals=list(range(k)), ticktext=[escape(t) for t in key_labels],
                         tickangle=-60, tickfont=dict(size=_font_px(k)), showgrid=False, row=1, col=c)
    fig.update_yaxes(tickmode="array", tickvals=list(range(q)), ticktext=[escape(t) for t in query_labels],
                     tickfont=dict(size=_font_px(q)), autorange="reversed", showgrid=False)
    fig.update_layout(
        title=dict(text=escape(f"{KIND_TITLES[scores.kind]}, layer {scores.layer + 1}, head {head + 1}, "
                               f"sentence #{row + 1} of the batch")),
        height=max(380, 230 + _row_px(q) * q), margin=dict(l=10, r=10, t=80, b=120), plot_bgcolor="rgba(0,0,0,0)")
    return fig
