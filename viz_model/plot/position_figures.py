"""Figures of the positional schemes (the Positional encoding page): RoPE's angles and decay, ALiBi's slopes, T5's
buckets and learned values, the positional part of the scores, and one head's scores split into content and
position. Plain functions from library arrays to a `go.Figure`, no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..lessons.position_parts import ScoreSplit
from .figure_style import HEAD_COLORS, MARGIN, _token_axis, escape
from .pe_lab_figures import side_by_side_figure


def offset_parts_figure(panels: Sequence[tuple[str, np.ndarray]], title: str, height: int = 400) -> go.Figure:
    """The positional part of the scores between query p (rows) and key j (columns), one heatmap per panel."""
    fig = side_by_side_figure(panels, height=height, x_title="key position j", y_title="query position p")
    for column in range(2, len(panels) + 1):
        fig.update_yaxes(title=dict(text=""), row=1, col=column)
    fig.update_layout(title=dict(text=escape(title), y=0.98), margin=dict(l=10, r=10, t=90, b=10))
    return fig


def rope_angles_figure(angles: np.ndarray) -> go.Figure:
    """The angle each frequency pair of a head is turned by at each position (modulo 2π)."""
    fig = go.Figure(go.Heatmap(z=angles, colorscale="Twilight", zmin=0.0, zmax=2 * np.pi,
                               colorbar=dict(title=dict(text="angle (rad)")),
                               hovertemplate="position %{y}, pair %{x}: %{z:.3f} rad<extra></extra>"))
    fig.update_layout(title=dict(text="RoPE: each pair's angle at each position (mod 2π)"), height=380, margin=MARGIN,
                      xaxis_title="frequency pair i (fast → slow)", yaxis_title="position p")
    fig.update_yaxes(autorange="reversed")
    return fig


def rope_decay_figure(decays: dict[int, np.ndarray], base: float) -> go.Figure:
    """q·k of an all-ones query and key as their distance grows (RoFormer's long-term decay), one line per head
    width, each divided by its value at distance 0."""
    fig = go.Figure()
    for n, (d_head, decay) in enumerate(decays.items()):
        fig.add_trace(go.Scatter(x=np.arange(len(decay)), y=decay / decay[0], mode="lines", name=f"d_head {d_head}",
                                 line=dict(color=HEAD_COLORS[n % len(HEAD_COLORS)]),
                                 hovertemplate=f"d_head {d_head}, distance %{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=dict(text=f"RoPE: q·k of one vector with itself at a distance (base {base:g}), relative "
                                      "to distance 0"), height=360, margin=MARGIN, xaxis_title="distance |p − j|",
                      yaxis_title="score / score at 0", legend=dict(orientation="h", y=-0.25))
    return fig


def alibi_slopes_figure(slopes: np.ndarray) -> go.Figure:
    """Each head's ALiBi slope: its score drops by slope × distance."""
    heads = [f"head {h + 1}" for h in range(len(slopes))]
    fig = go.Figure(go.Bar(x=heads, y=slopes, marker_color=HEAD_COLORS[1],
                           hovertemplate="%{x}: slope %{y:.5f}<extra></extra>"))
    fig.update_layout(title=dict(text="ALiBi: each head's slope (penalty per position of distance)"), height=320,
                      margin=MARGIN, yaxis_title="slope m", yaxis_type="log")
    return fig


def relative_buckets_figure(buckets: dict[str, np.ndarray],
                            title: str = "T5's relative bias: the bucket of each offset (key − query)",
                            x_title: str = "offset j − p") -> go.Figure:
    """The bucket of each offset (``buckets["offset"]``), one line per other entry: T5's encoder and decoder (key −
    query), or DeBERTa's (query − key) with its `title` and `x_title`."""
    fig = go.Figure()
    for n, stack in enumerate(name for name in buckets if name != "offset"):
        fig.add_trace(go.Scatter(x=buckets["offset"], y=buckets[stack], mode="lines+markers", name=escape(stack),
                                 line=dict(color=HEAD_COLORS[n], shape="hv"), marker=dict(size=4),
                                 hovertemplate=f"{escape(stack)}: offset %{{x}} → bucket %{{y}}<extra></extra>"))
    fig.update_layout(title=dict(text=title), height=340, margin=MARGIN, xaxis_title=x_title, yaxis_title="bucket")
    return fig


def rope_bases_figure(wavelengths: dict[str, np.ndarray], marks: dict[str, float]) -> go.Figure:
    """Each frequency pair's wavelength (positions per turn) under each RoPE base (ModernBERT's global and local
    layers), on a log scale, with lengths marked."""
    fig = go.Figure()
    for n, (name, lengths) in enumerate(wavelengths.items()):
        fig.add_trace(go.Scatter(x=np.arange(len(lengths)), y=lengths, mode="lines+markers", name=escape(name),
                                 line=dict(color=HEAD_COLORS[n]), marker=dict(size=5),
                                 hovertemplate=f"{escape(name)}: pair %{{x}} turns once in %{{y:,.1f}} positions"
                                               "<extra></extra>"))
    for n, (label, value) in enumerate(marks.items()):
        fig.add_hline(y=value, line=dict(color=HEAD_COLORS[(n + 3) % len(HEAD_COLORS)], dash="dash"),
                      annotation_text=escape(label))
    fig.update_layout(title=dict(text="RoPE: each pair's wavelength under each base"), height=380, margin=MARGIN,
                      xaxis_title="frequency pair i (fast → slow)", yaxis_title="wavelength (positions)",
                      yaxis_type="log", legend=dict(orientation="h", y=-0.25))
    return fig


def relative_values_figure(values: np.ndarray, stack: str) -> go.Figure:
    """The learned bias of each bucket (rows) and head (columns)."""
    fig = go.Figure(go.Heatmap(z=values, x=[f"head {h + 1}" for h in range(values.shape[1])], colorscale="RdBu_r",
                               zmid=0.0, colorbar=dict(title=dict(text="bias")),
                               hovertemplate="bucket %{y}, %{x}: %{z:.4f}<extra></extra>"))
    fig.update_layout(title=dict(text=f"T5's relative bias: the {escape(stack)}'s learned value per bucket and head"),
                      height=420, margin=MARGIN, yaxis_title="bucket")
    fig.update_yaxes(autorange="reversed")
    return fig


def score_split_figure(split: ScoreSplit, queries: Sequence[str], keys: Sequence[str], title: str) -> go.Figure:
    """The head's scores and each part of them, side by side, on the sentence's tokens; the parts add up to the
    scores."""
    panels = [("score", split.score)] + list(split.parts.items())
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[escape(name) for name, _ in panels],
                        horizontal_spacing=0.04)
    limit = float(max(np.abs(z).max() for _, z in panels)) or 1.0
    for c, (name, z) in enumerate(panels, start=1):
        fig.add_trace(go.Heatmap(z=z, colorscale="RdBu_r", zmin=-limit, zmax=limit, showscale=c == len(panels),
                                 name=escape(name), hovertemplate=f"{escape(name)}<br>query %{{y}}, key %{{x}}: "
                                                                  "%{z:.4f}<extra></extra>"), row=1, col=c)
        fig.update_xaxes(_token_axis(keys, "keys"), tickangle=-60, row=1, col=c)
        fig.update_yaxes(_token_axis(queries, "queries" if c == 1 else "", reverse=True), showticklabels=c == 1,
                         row=1, col=c)
    fig.update_layout(title=dict(text=escape(title)), height=max(380, 200 + 22 * len(queries)),
                      margin=dict(l=10, r=10, t=90, b=10))
    return fig
