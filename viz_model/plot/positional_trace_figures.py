"""The Positional page's figures of a trace: the encodings its tokens got, chosen sinusoids, embedding + PE."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from ..config.checks import check_int
from ..nn.positional import dimension_axis, wave
from .figure_style import HEAD_COLORS, _row_px, _token_axis, escape


# --- positional encodings ----------------------------------------------------------------------------------------
def positional_heatmap(pe: np.ndarray, tokens: Sequence[str], title: str = "Positional encodings",
                       layout: str = "interleaved") -> go.Figure:
    """The ``(positions, d_model)`` PE matrix for the sentence, one row per token position; axis and hover name
    sin and cos as the model's `layout` places them."""
    n, d = pe.shape
    custom = np.empty((n, d), dtype=object)
    kinds = [wave(dim, d, layout) for dim in range(d)]
    for i, t in enumerate(tokens):
        custom[i, :] = [f"{i}: {escape(t)}<br>dimension {dim} ({kinds[dim]})" for dim in range(d)]
    fig = go.Figure(go.Heatmap(
        z=pe, x=list(range(d)), y=list(range(n)), customdata=custom, colorscale="RdBu_r", zmid=0.0,
        colorbar=dict(title=dict(text="value")),
        hovertemplate="position %{customdata}<br>PE %{z:.6f}<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=max(320, 150 + _row_px(n) * n),
                      xaxis=dict(title=dict(text=dimension_axis(layout)), showgrid=False),
                      yaxis=_token_axis(tokens, "position: token", reverse=True),
                      margin=dict(l=10, r=10, t=60, b=10))
    return fig


def sinusoid_figure(table: np.ndarray, dims: Sequence[int], marked: int = 0, layout: str = "interleaved") -> go.Figure:
    """Chosen PE dimensions as curves over positions ``0 .. len(table)-1``; the first `marked` positions dotted."""
    length, d = table.shape
    fig = go.Figure()
    for n, dim in enumerate(dims):
        check_int("dimension", dim, 0, d - 1, error=ValueError, kinds=(int, np.integer),
                  message=f"dimension {dim} is out of range (d_model = {d})")
        color = HEAD_COLORS[n % len(HEAD_COLORS)]
        kind = wave(dim, d, layout)
        fig.add_trace(go.Scatter(x=list(range(length)), y=table[:, dim], mode="lines", line=dict(color=color),
                                 name=f"dim {dim} ({kind})",
                                 hovertemplate=f"dim {dim}<br>position %{{x}}<br>%{{y:.6f}}<extra></extra>"))
        if marked:
            fig.add_trace(go.Scatter(x=list(range(min(marked, length))), y=table[:marked, dim], mode="markers",
                                     marker=dict(color=color, size=7), showlegend=False, hoverinfo="skip"))
    fig.update_layout(title=dict(text="Sinusoids of the chosen dimensions (dots: the sentence's positions)"),
                      height=380, xaxis=dict(title=dict(text="position")), yaxis=dict(title=dict(text="PE value")),
                      margin=dict(l=10, r=10, t=60, b=10), hovermode="closest")
    return fig


def embedding_figure(embedding: np.ndarray, positional: np.ndarray, token: str, position: int,
                     scaled: bool = True) -> go.Figure:
    """A token's embedding (× √d_model where the model scales it: `scaled`), its position's encoding, and their sum
    (what the first layer reads)."""
    d = embedding.shape[0]
    dims = list(range(d))
    fig = go.Figure()
    embedded = "embedding × √d_model" if scaled else "embedding"
    for values, name, color in ((embedding, embedded, "#636efa"), (positional, "positional encoding",
                                "#00cc96"), (embedding + positional, "embedding + PE", "#ef553b")):
        fig.add_trace(go.Scatter(x=dims, y=values, mode="lines", name=name, line=dict(color=color, width=1.5),
                                 hovertemplate=f"{name}<br>dim %{{x}}: %{{y:.6f}}<extra></extra>"))
    fig.update_layout(
        title=dict(text=escape(f"Token {position}: {token}: embedding vs embedding + PE "
                               f"(norms {np.linalg.norm(embedding):.2f}, {np.linalg.norm(positional):.2f}, "
                               f"{np.linalg.norm(embedding + positional):.2f})")),
        height=380, xaxis=dict(title=dict(text="dimension")), yaxis=dict(title=dict(text="value")),
        margin=dict(l=10, r=10, t=60, b=10), hovermode="x unified")
    return fig


def positional_similarity(pe: np.ndarray, tokens: Sequence[str]) -> go.Figure:
    """Cosine similarity between the encodings of the sentence's positions (nearby positions look alike)."""
    norms = np.linalg.norm(pe, axis=1, keepdims=True)
    unit = pe / np.where(norms == 0, 1.0, norms)
    sim = unit @ unit.T
    n = len(tokens)
    fig = go.Figure(go.Heatmap(z=sim, x=list(range(n)), y=list(range(n)), colorscale="RdBu_r", zmid=0.0,
                               colorbar=dict(title=dict(text="cosine")),
                               hovertemplate="positions %{y} and %{x}: cosine %{z:.4f}<extra></extra>"))
    fig.update_layout(title=dict(text="Cosine similarity between position encodings"),
                      height=max(320, 150 + _row_px(n) * n), xaxis=_token_axis(tokens, "position"),
                      yaxis=_token_axis(tokens, "position", reverse=True), margin=dict(l=10, r=10, t=60, b=10))
    return fig
