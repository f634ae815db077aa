"""Figures of the induction-heads run on "Watch attention form": the loss of each copy and every head's induction and
previous-token scores through training, and one head's map on the first probe before and after."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..lessons.induction_run import START_ID, InductionResult
from .figure_style import HEAD_COLORS, escape
from .pe_lab_figures import attention_pair_figure

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def token_label(token: int) -> str:
    """A symbol id as a letter (1 = A ... 26 = Z, then a ...; past those its number); the start token as ``<s>``."""
    if token == START_ID:
        return "<s>"
    return ALPHABET[token - 1] if token <= len(ALPHABET) else f"#{token}"


def training_figure(result: InductionResult) -> go.Figure:
    """Three panels against the step: the probes' loss on the first copy and on the repeat (with chance, log of the
    symbols), each head's induction score and each head's previous-token score."""
    steps = [s.step for s in result.snapshots]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07,
                        subplot_titles=["loss on the probes (nats per token)", "induction score of each head",
                                        "previous-token score of each head"])
    for name, values, color in (("first copy", [s.loss_first for s in result.snapshots], "#888888"),
                                ("repeat", [s.loss_repeat for s in result.snapshots], "#e4572e")):
        fig.add_trace(go.Scatter(x=steps, y=values, name=f"loss: {name}", mode="lines", line=dict(color=color),
                                 hovertemplate=f"{name}<br>step %{{x}}: %{{y:.3f}}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=[steps[0], steps[-1]], y=[result.chance_loss] * 2, name="chance: log(symbols)",
                             mode="lines", line=dict(color="#888888", dash="dot"), hoverinfo="skip"), row=1, col=1)
    cfg = result.config
    for layer in range(cfg.layers):
        for head in range(cfg.heads):
            label = f"L{layer + 1} H{head + 1}"
            color = HEAD_COLORS[(layer * cfg.heads + head) % len(HEAD_COLORS)]
            dash = "solid" if layer == cfg.layers - 1 else "dash"
            for col, attribute in ((2, "induction"), (3, "previous")):
                fig.add_trace(go.Scatter(x=steps, y=[float(getattr(s, attribute)[layer, head]) for s in
                                                     result.snapshots],
                                         name=label, legendgroup=label, showlegend=col == 2, mode="lines",
                                         line=dict(color=color, dash=dash),
                                         hovertemplate=f"{label}<br>step %{{x}}: %{{y:.3f}}<extra></extra>"),
                              row=1, col=col)
    fig.update_xaxes(title=dict(text="step"))
    fig.update_yaxes(range=[0, 1], row=1, col=2)
    fig.update_yaxes(range=[0, 1], row=1, col=3)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=-0.25))
    return fig


def maps_figure(result: InductionResult, layer: int, head: int, before: int = 0, after: int = -1) -> go.Figure:
    """One head's attention on the first probe at snapshot `before` and at `after`, side by side."""
    tokens = [token_label(t) for t in result.probes[0][:-1]]
    panels = []
    for index in (before, after):
        shot = result.snapshots[index]
        panels.append((f"step {shot.step}", shot.maps[layer][head], tokens, tokens))
    return attention_pair_figure(panels, f"Layer {layer + 1}, head {head + 1} on a repeated random sequence "
                                         f"({escape(str(len(tokens)))} tokens)")
