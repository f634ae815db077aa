"""Figures of the live long-context experiments: perplexity under an evicted key/value window for each count of kept
sink tokens (StreamingLLM's Table 1 on the loaded model), and the loss by position past the trained length with each
RoPE scaling on. Plain functions to a `go.Figure`, no Streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..lessons.position_length import PositionLoss
from .figure_style import HEAD_COLORS, MARGIN, _marks


def eviction_figure(perplexities: dict[str, float], window: int) -> go.Figure:
    """One bar per kept count (its perplexity with a `window` of keys), the full context as a dashed line."""
    counts = [name for name in perplexities if name != "full"]
    fig = go.Figure(go.Bar(x=[f"{n} kept" for n in counts], y=[perplexities[n] for n in counts],
                           marker_color=HEAD_COLORS[0], text=[f"{perplexities[n]:,.1f}" for n in counts],
                           textposition="outside", hovertemplate="%{x}: perplexity %{y:,.2f}<extra></extra>"))
    _marks(fig, {f"full context {perplexities['full']:,.1f}": perplexities["full"]}, axis="y")
    fig.update_layout(title=dict(text=f"Perplexity with a window of {window} keys, by initial tokens kept"),
                      height=400, margin=MARGIN, xaxis_title="initial tokens kept (the rest of the window: the most "
                      "recent tokens)", yaxis_title="perplexity", showlegend=False)
    return fig


def scaling_figure(runs: dict[str, PositionLoss], window: int, marks: dict[str, float]) -> go.Figure:
    """Each run's loss by position, a running mean over `window` positions, one line each; `marks`: trained
    lengths."""
    fig = go.Figure()
    for n, (name, result) in enumerate(runs.items()):
        positions = np.arange(1, len(result.losses) + 1)  # the loss of token t + 1 drawn at its own position
        fig.add_trace(go.Scatter(x=positions, y=result.smoothed(window), mode="lines", name=name,
                                 line=dict(color=HEAD_COLORS[n], width=3 if n == 0 else 2),
                                 hovertemplate=f"{name}, token %{{x}}: mean %{{y:.3f}} nats<extra></extra>"))
    _marks(fig, marks)
    fig.update_layout(title=dict(text=f"Loss by position, mean of the last {window}, with each scaling"), height=420,
                      margin=MARGIN, xaxis_title="position of the predicted token", yaxis_title="loss (nats)",
                      legend=dict(orientation="h", y=-0.2))
    return fig
