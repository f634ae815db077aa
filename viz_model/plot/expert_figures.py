"""A mixture of experts' routing: each token's router weight on each expert of one layer (tokens x experts)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .figure_style import MARGIN, escape


def routing_heatmap(matrix: np.ndarray, tokens: Sequence[str], layer: int, boundary: int | None = None) -> go.Figure:
    """``matrix`` ``(tokens, experts)`` as a heatmap, a token a row (top first), an expert a column, on the fixed scale
    0 to 1; `boundary`: where the prompt ends (a line above that row)."""
    rows = [f"{i} {escape(repr(t))}" for i, t in enumerate(tokens)]
    columns = [f"expert {e + 1}" for e in range(matrix.shape[1])]
    fig = go.Figure(go.Heatmap(z=np.where(matrix > 0, matrix, np.nan), x=columns, y=rows, zmin=0, zmax=1,
                               colorscale="Purples", colorbar=dict(title=dict(text="router<br>weight")),
                               hovertemplate="%{y}<br>%{x}: weight %{z:.3f}<extra></extra>", xgap=1, ygap=1))
    if boundary is not None and 0 < boundary < len(rows):
        fig.add_hline(y=boundary - 0.5, line=dict(color="#d62728", dash="dot", width=2))
    fig.update_layout(title=dict(text=f"Layer {layer + 1}: each token's experts and their router weights"),
                      height=min(1400, 120 + 18 * len(rows)), margin={**MARGIN, "l": 120},
                      yaxis=dict(autorange="reversed", type="category"), xaxis=dict(type="category"),
                      plot_bgcolor="rgba(0,0,0,0)")
    return fig
