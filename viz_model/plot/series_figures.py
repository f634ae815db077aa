"""Figures of a model across its training (Watch attention form's series mode): the best head's scores and the loss
on repeated random tokens at every checkpoint, and one score of every head at every checkpoint as a heatmap."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.checkpoint_scores import STEP_SCORES, CheckpointScores

SCORE_LABELS = {"induction": "induction score", "previous_token": "previous-token score",
                "first_token": "first-token (sink) share"}
SCORE_COLORS = {"induction": "#e4572e", "previous_token": "#4c78a8", "first_token": "#54a24b"}


def head_labels(scores: CheckpointScores) -> list[str]:
    """``L1 H1``, ``L1 H2``, ... in the order of a scores table's rows (1-based)."""
    return [f"L{int(layer) + 1} H{int(head) + 1}" for layer, head in zip(scores.heads["layer"], scores.heads["head"])]


def score_grid(found: dict[int, CheckpointScores], score: str) -> np.ndarray:
    """``(steps, heads)`` each head's `score` at each step, in the steps' order."""
    return np.array([found[step].heads[score].to_numpy(dtype=np.float64) for step in found])


def series_figure(found: dict[int, CheckpointScores]) -> go.Figure:
    """Two panels against the training step: the best head's induction, previous-token and first-token scores (a
    share of attention, 0 to 1), and the loss on the first copy and on the repeats (nats per token)."""
    steps = list(found)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=["the strongest head's score", "loss on repeated random tokens"])
    for score in STEP_SCORES:
        grid = score_grid(found, score)
        best = np.nanargmax(np.nan_to_num(grid, nan=-1.0), axis=1)
        labels = [head_labels(found[step])[int(i)] for step, i in zip(steps, best)]
        fig.add_trace(go.Scatter(x=steps, y=grid[np.arange(len(steps)), best], name=SCORE_LABELS[score],
                                 mode="lines+markers", line=dict(color=SCORE_COLORS[score]), customdata=labels,
                                 hovertemplate=f"{SCORE_LABELS[score]}<br>step %{{x}}: %{{y:.3f}} "
                                               "(%{customdata})<extra></extra>"), row=1, col=1)
    for name, values, color in (("first copy", [found[s].loss_first for s in steps], "#888888"),
                                ("repeats", [found[s].loss_repeats for s in steps], "#e4572e")):
        fig.add_trace(go.Scatter(x=steps, y=values, name=f"loss: {name}", mode="lines+markers",
                                 line=dict(color=color, dash="dot" if name == "first copy" else "solid"),
                                 hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}} nats<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title=dict(text="training step"))
    fig.update_yaxes(range=[0, 1], row=1, col=1)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=-0.25))
    return fig


def heads_figure(found: dict[int, CheckpointScores], score: str) -> go.Figure:
    """`score` of every head (columns, ``L1 H1``...) at every step (rows), on the fixed scale 0 to 1."""
    steps = list(found)
    grid = score_grid(found, score)
    labels = head_labels(found[steps[0]])
    fig = go.Figure(go.Heatmap(z=grid, x=labels, y=[str(s) for s in steps], zmin=0.0, zmax=1.0,
                               colorscale="Viridis", colorbar=dict(title=dict(text=SCORE_LABELS[score])),
                               hovertemplate="%{x}, step %{y}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"{SCORE_LABELS[score].capitalize()} of every head at every checkpoint",
                      xaxis_title="layer and head", yaxis_title="training step", yaxis_type="category",
                      height=max(300, 40 + 22 * len(steps)), margin=dict(l=10, r=10, t=50, b=10))
    return fig
