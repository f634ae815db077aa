"""Attention by hand's figures: a small weight matrix with its numbers, softmax saturation against d_k, one map
per head."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .figure_style import MARGIN, WEIGHT_SCALE, _token_axis, escape


# --- attention by hand -------------------------------------------------------------------------------------------
def weights_figure(weights: np.ndarray, labels: Sequence[str], title: str, mask: np.ndarray | None = None
                   ) -> go.Figure:
    """A small attention matrix with its numbers printed; masked cells say −∞ → 0."""
    n, m = weights.shape
    text = [[("0 (masked)" if mask is not None and not mask[i, j] else f"{weights[i, j]:.4f}") for j in range(m)]
            for i in range(n)]
    fig = go.Figure(go.Heatmap(z=weights, x=list(range(m)), y=list(range(n)), text=text, texttemplate="%{text}",
                               colorscale=WEIGHT_SCALE, zmin=0.0, zmax=1.0, xgap=2, ygap=2,
                               colorbar=dict(title=dict(text="weight")),
                               hovertemplate="query %{y} → key %{x}: %{text}<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=120 + 60 * n, margin=MARGIN,
                      xaxis=_token_axis(labels, "keys"), yaxis=_token_axis(labels, "queries", reverse=True))
    return fig


def saturation_figure(data: pd.DataFrame, keys: int) -> go.Figure:
    """Softmax entropy and max weight against d_k (log axis), with and without the 1/√d_k scaling."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["softmax entropy (nats)", "largest weight"],
                        horizontal_spacing=0.1)
    for scaled, name, color in ((False, "QKᵀ (not scaled)", "#ef553b"), (True, "QKᵀ / √d_k (scaled)", "#636efa")):
        part = data[data["scaled"] == scaled]
        for c, column in enumerate(("entropy", "max_weight"), start=1):
            fig.add_trace(go.Scatter(x=part["d_k"], y=part[column], mode="lines+markers", name=name,
                                     legendgroup=name, showlegend=c == 1, line=dict(color=color),
                                     customdata=part["score_std"],
                                     hovertemplate=f"{name}<br>d_k %{{x}}<br>{column} %{{y:.4f}}<br>score std "
                                                   "%{customdata:.2f}<extra></extra>"), row=1, col=c)
    fig.add_hline(y=float(np.log(keys)), line=dict(color="#999", dash="dot"), annotation_text=f"uniform: ln {keys}",
                  row=1, col=1)
    fig.add_hline(y=1.0, line=dict(color="#999", dash="dot"), annotation_text="one-hot", row=1, col=2)
    fig.update_xaxes(type="log", title=dict(text="d_k"))
    fig.update_layout(title=dict(text=f"Random unit-variance queries and keys, {keys} keys: without scaling the "
                                      "softmax saturates as d_k grows"),
                      height=400, margin=dict(l=10, r=10, t=80, b=10), legend=dict(orientation="h", y=-0.2))
    return fig


def heads_figure(weights: np.ndarray, labels: Sequence[str], title: str) -> go.Figure:
    """One small weight matrix per head."""
    heads, n, _ = weights.shape
    fig = make_subplots(rows=1, cols=heads, subplot_titles=[f"head {h + 1}" for h in range(heads)],
                        horizontal_spacing=0.04)
    for h in range(heads):
        fig.add_trace(go.Heatmap(z=weights[h], x=list(range(n)), y=list(range(n)), colorscale=WEIGHT_SCALE, zmin=0,
                                 zmax=1, showscale=h == heads - 1, text=np.round(weights[h], 3),
                                 texttemplate="%{text}" if n <= 6 and heads <= 4 else None, xgap=1, ygap=1,
                                 hovertemplate=f"head {h + 1}<br>query %{{y}} → key %{{x}}: %{{z:.4f}}<extra></extra>"),
                      row=1, col=h + 1)
        fig.update_xaxes(_token_axis(labels, ""), row=1, col=h + 1)
        fig.update_yaxes(_token_axis(labels, "", reverse=True), row=1, col=h + 1)
    fig.update_layout(title=dict(text=escape(title)), height=160 + 50 * n, margin=dict(l=10, r=10, t=80, b=10))
    return fig
