"""Figures of an `viz_model.attribution.Attribution`: source vs prefix shares, contribution matrices, the methods
side by side for one output token, and deletion curves (faithfulness)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..attribution import Attribution
from ..attribution.faithfulness import RANDOM
from .figure_style import HEAD_COLORS, LEGEND_ABOVE, _token_axis, escape

METHOD_LABELS = {"attention_mean": "attention (mean of layers)", "rollout": "attention rollout",
                 "value_weighted": "value-weighted attention", "alti": "ALTI+", "saliency": "saliency (‖gradient‖)",
                 "input_x_gradient": "input × gradient", "integrated_gradients": "integrated gradients",
                 RANDOM: "random tokens"}
MARGIN = dict(l=10, r=10, t=70, b=10)


def method_label(method: str) -> str:
    if method.startswith("attention_layer"):
        return f"attention, layer {method.removeprefix('attention_layer')}"
    return METHOD_LABELS.get(method, method)


def share_figure(result: Attribution) -> go.Figure:
    """ALTI+: per output token, the share of its prediction from the source and from the target prefix."""
    share = result.source_share()
    labels = [f"{i}: {escape(t)}" for i, t in enumerate(result.output_tokens)]
    fig = go.Figure([
        go.Bar(x=labels, y=share, name="source", marker_color="#3182bd",
               hovertemplate="%{x}<br>from the source: %{y:.1%}<extra></extra>"),
        go.Bar(x=labels, y=1 - share, name="target prefix", marker_color="#fd8d3c",
               hovertemplate="%{x}<br>from the target prefix: %{y:.1%}<extra></extra>")])
    fig.update_layout(barmode="stack", title=dict(text="Where each output token's prediction comes from (ALTI+)"),
                      yaxis=dict(title=dict(text="share"), range=[0, 1], tickformat=".0%"),
                      xaxis=dict(title=dict(text="output token"), automargin=True, tickangle=-45 if len(labels) > 12
                                 else 0),
                      legend=LEGEND_ABOVE, height=400, margin=dict(MARGIN, t=100))
    return fig


def contribution_figure(result: Attribution, method: str) -> go.Figure:
    """Rows: output tokens; columns: source tokens, then (for ALTI+ and the gradients) the target prefix."""
    source = result.source_scores(method)
    try:
        prefix = result.prefix_scores(method)
    except ValueError:
        prefix = None
    matrix = source if prefix is None else np.concatenate([source, prefix], axis=1)
    keys = [f"src {t}" for t in result.source_tokens] + ([f"tgt {t}" for t in result.prefix_tokens]
                                                         if prefix is not None else [])
    signed = (matrix < 0).any()
    limit = float(max(np.abs(matrix).max(), 1e-9))
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(keys))), y=list(range(len(result.output_tokens))),
        colorscale="RdBu" if signed else "Blues", zmid=0.0 if signed else None, zmin=-limit if signed else 0.0,
        zmax=limit, colorbar=dict(title=dict(text="score")),
        customdata=np.array([[f"{i}: {escape(o)}", f"{j}: {escape(k)}"] for i, o in enumerate(result.output_tokens)
                             for j, k in enumerate(keys)], dtype=object).reshape(len(result.output_tokens),
                                                                                  len(keys), 2),
        hovertemplate="output %{customdata[0]}<br>input %{customdata[1]}<br>score %{z:.4f}<extra></extra>"))
    if prefix is not None:
        fig.add_vline(x=len(result.source_tokens) - 0.5, line=dict(color="#444", width=2))
    fig.update_layout(title=dict(text=f"{escape(method_label(method))}: every output token (rows) from every input "
                                      "token (columns: source, then target prefix)"),
                      xaxis=_token_axis(keys, "input tokens"),
                      yaxis=_token_axis(result.output_tokens, "output tokens", reverse=True),
                      height=max(380, 170 + 22 * len(result.output_tokens)), margin=MARGIN)
    fig.update_xaxes(tickangle=-45 if len(keys) > 12 else 0)
    return fig


def methods_figure(result: Attribution, output: int, methods: Sequence[str]) -> go.Figure:
    """For one output token, each method's scores over the source tokens, scaled to the largest magnitude (1)."""
    if not 0 <= output < len(result.output_tokens):
        raise ValueError(f"output token {output} is out of range (the translation has {len(result.output_tokens)})")
    labels = [f"{j}: {escape(t)}" for j, t in enumerate(result.source_tokens)]
    fig = go.Figure()
    for n, method in enumerate(methods):
        row = result.source_scores(method)[output]
        scaled = row / max(float(np.abs(row).max()), 1e-12)
        fig.add_trace(go.Bar(x=labels, y=scaled, name=escape(method_label(method)),
                             marker_color=HEAD_COLORS[n % len(HEAD_COLORS)], customdata=row,
                             hovertemplate="%{x}<br>scaled %{y:.3f} (score %{customdata:.4g})<extra>"
                                           + escape(method_label(method)) + "</extra>"))
    title = (f"Why “{escape(result.output_tokens[output])}” (output {output}): each method's source scores, scaled "
             "to its largest")
    fig.update_layout(barmode="group", title=dict(text=title),
                      yaxis=dict(title=dict(text="score / largest |score|")),
                      xaxis=dict(title=dict(text="source token"), automargin=True),
                      legend=LEGEND_ABOVE, height=460, margin=dict(MARGIN, t=100))
    return fig


def deletion_figure(deletions: pd.DataFrame) -> go.Figure:
    """Mean comprehensiveness (left, higher = more faithful) and sufficiency (right, lower = better) against k."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["remove the top k: the drop of log p (higher = faithful)",
                                                        "keep only the top k: the drop (lower = sufficient)"])
    means = deletions.groupby(["method", "k"], sort=False)[["comprehensiveness", "sufficiency"]].mean().reset_index()
    for n, (method, group) in enumerate(means.groupby("method", sort=False)):
        style = dict(color="#888", dash="dash") if method == RANDOM else dict(color=HEAD_COLORS[n % len(HEAD_COLORS)])
        for col, column in ((1, "comprehensiveness"), (2, "sufficiency")):
            fig.add_trace(go.Scatter(x=group["k"], y=group[column], mode="lines+markers", line=style,
                                     name=escape(method_label(method)), legendgroup=method, showlegend=col == 1,
                                     hovertemplate=f"{escape(method_label(method))}<br>k %{{x}}: %{{y:.3f}}"
                                                   "<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title=dict(text="k (source tokens)"), dtick=1)
    fig.update_yaxes(title=dict(text="Δ log p"), col=1)
    fig.update_layout(title=dict(text="Which explanation is faithful: deleting what each method ranks highest"),
                      height=440, legend=dict(orientation="h", y=-0.2), margin=MARGIN)
    return fig
