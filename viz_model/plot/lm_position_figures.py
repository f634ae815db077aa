"""Figures of a loaded language model's positions (the Positional encoding page): a learned table's principal
components, RoPE's frequencies and their scaling (beside the other scalings'), q·k by distance per head, each head's
frequency bands, ALiBi's bias by distance and the loss at each position of a long text. Plain functions to a
`go.Figure`, no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..lessons.position_length import PositionLoss
from ..lessons.position_rope import GROWN, KEPT, SMOOTHED, STRETCHED
from .figure_style import HEAD_COLORS, MARGIN, _marks, escape

SCALING_COLORS = {KEPT: "#3182bd", STRETCHED: "#e4572e", SMOOTHED: "#f2a900", GROWN: "#8e44ad"}


def components_figure(coordinates: np.ndarray, explained: np.ndarray, title: str) -> go.Figure:
    """Each position's coordinates on the table's principal components: one line per component against the position
    (left) and the positions in the plane of the first two, coloured by position (right)."""
    count = coordinates.shape[1]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["coordinate on each component, by position",
                                                        "positions in the plane of components 1 and 2"])
    positions = np.arange(coordinates.shape[0])
    for c in range(count):
        fig.add_trace(go.Scatter(x=positions, y=coordinates[:, c], mode="lines",
                                 name=f"component {c + 1} ({explained[c]:.0%} of the variance)",
                                 line=dict(color=HEAD_COLORS[c % len(HEAD_COLORS)]),
                                 hovertemplate=f"component {c + 1}, position %{{x}}: %{{y:.3f}}<extra></extra>"),
                      row=1, col=1)
    if count >= 2:
        fig.add_trace(go.Scatter(x=coordinates[:, 0], y=coordinates[:, 1], mode="lines+markers", showlegend=False,
                                 marker=dict(color=positions, colorscale="Viridis", size=5,
                                             colorbar=dict(title=dict(text="position"), x=1.02)),
                                 line=dict(color="#c8c8c8", width=1), customdata=positions,
                                 hovertemplate="position %{customdata}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title=dict(text="position p"), row=1, col=1)
    fig.update_xaxes(title=dict(text="component 1"), row=1, col=2)
    fig.update_yaxes(title=dict(text="component 2"), row=1, col=2)
    fig.update_layout(title=dict(text=escape(title)), height=440, margin=dict(l=10, r=10, t=90, b=10),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def frequency_figure(table: pd.DataFrame, marks: dict[str, float]) -> go.Figure:
    """Each pair's wavelength in the model (coloured by what its scaling did) and before scaling (grey), on a log
    scale, with the trained lengths marked."""
    fig = go.Figure(go.Scatter(x=table["pair"], y=table["unscaled wavelength"], mode="markers",
                               name="before scaling", marker=dict(color="#c8c8c8", size=9, symbol="circle-open"),
                               hovertemplate="pair %{x}: %{y:,.1f} positions before scaling<extra></extra>"))
    for status, color in SCALING_COLORS.items():
        rows = table[table["scaling"] == status]
        if len(rows):
            fig.add_trace(go.Scatter(x=rows["pair"], y=rows["wavelength"], mode="markers", name=status,
                                     marker=dict(color=color, size=8), customdata=rows["stretch"],
                                     hovertemplate="pair %{x}: %{y:,.1f} positions (×%{customdata:.3g})"
                                                   "<extra></extra>"))
    return _wavelength_axes(fig, marks, "RoPE: each frequency pair's wavelength in this model", 400)


def _wavelength_axes(fig: go.Figure, marks: dict[str, float], title: str, height: int) -> go.Figure:
    """`fig` with the pairs across, their wavelengths up on a log scale, the trained lengths marked."""
    _marks(fig, marks, axis="y", log=True)
    fig.update_layout(title=dict(text=title), height=height, margin=MARGIN,
                      xaxis_title="frequency pair i (fast → slow)",
                      yaxis=dict(title=dict(text="wavelength (positions)"), type="log"),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def scalings_figure(table: pd.DataFrame, marks: dict[str, float]) -> go.Figure:
    """Each rotating pair's wavelength under each scaling of `table` (`position_rope.scaling_comparison`: unscaled
    grey, the model's own solid, illustrations dashed), on a log scale, with the trained lengths marked."""
    fig = go.Figure()
    for index, name in enumerate(c for c in table.columns if c != "pair"):
        style = dict(color="#c8c8c8", width=3) if name == "no scaling" else \
            dict(color=HEAD_COLORS[index % len(HEAD_COLORS)], dash="dash" if "illustration" in name else "solid")
        fig.add_trace(go.Scatter(x=table["pair"], y=table[name], mode="lines+markers", name=escape(name), line=style,
                                 hovertemplate=f"{escape(name)}, pair %{{x}}: %{{y:,.1f}} positions<extra></extra>"))
    return _wavelength_axes(fig, marks, "RoPE: each rotating pair's wavelength under each scaling", 420)


def head_curves_figure(curves: np.ndarray, title: str, y_title: str, x_title: str = "distance p − j",
                       heads: Sequence[int] | None = None) -> go.Figure:
    """One line per head ``(heads, distances)`` (NaN: no pair that far apart); `heads`: the 0-based heads drawn."""
    fig = go.Figure()
    for h in range(curves.shape[0]) if heads is None else heads:
        fig.add_trace(go.Scatter(x=np.arange(curves.shape[1]), y=curves[h], mode="lines", name=f"head {h + 1}",
                                 line=dict(color=HEAD_COLORS[h % len(HEAD_COLORS)]),
                                 hovertemplate=f"head {h + 1}, distance %{{x}}: %{{y:.4f}}<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=380, margin=MARGIN, xaxis_title=x_title,
                      yaxis_title=y_title, legend=dict(orientation="h", y=-0.25))
    return fig


def band_share_figure(shares: np.ndarray, title: str, colorbar: str) -> go.Figure:
    """A heatmap of one number per layer and head ``(layers, heads)`` (layers and heads counted from 1)."""
    layers, heads = shares.shape
    fig = go.Figure(go.Heatmap(z=shares, x=[f"head {h + 1}" for h in range(heads)],
                               y=[f"layer {layer + 1}" for layer in range(layers)], colorscale="Viridis", zmin=0.0,
                               zmax=1.0, colorbar=dict(title=dict(text=escape(colorbar))),
                               hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=max(260, 140 + 28 * layers), margin=MARGIN)
    fig.update_yaxes(autorange="reversed")
    return fig


def pair_share_figure(shares: np.ndarray, bands: Sequence[str], layer: int) -> go.Figure:
    """Each pair's share of what each head of one layer can carry ``(heads, pairs)``, the pairs labelled by band."""
    heads, pairs = shares.shape
    fig = go.Figure(go.Heatmap(z=shares, x=[f"{i} ({bands[i]})" for i in range(pairs)],
                               y=[f"head {h + 1}" for h in range(heads)], colorscale="Viridis", zmin=0.0,
                               colorbar=dict(title=dict(text="share")),
                               hovertemplate="%{y}, pair %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(title=dict(text=f"Layer {layer + 1}: each frequency pair's share of mean |q|·|k|"),
                      height=max(280, 140 + 26 * heads), margin=MARGIN, xaxis_title="frequency pair (band)")
    fig.update_yaxes(autorange="reversed")
    return fig


def loss_figure(result: PositionLoss, window: int, marks: dict[str, float]) -> go.Figure:
    """The loss of each next token by position (faint) and its running mean over `window` positions, the trained
    lengths marked."""
    positions = np.arange(1, len(result.losses) + 1)  # the loss of token t + 1 is drawn at its own position
    fig = go.Figure([go.Scatter(x=positions, y=result.losses, mode="lines", name="each token",
                                line=dict(color="#c8c8c8", width=1),
                                hovertemplate="token %{x}: %{y:.3f} nats<extra></extra>"),
                     go.Scatter(x=positions, y=result.smoothed(window), mode="lines",
                                name=f"mean of the last {window}", line=dict(color=HEAD_COLORS[0], width=2.5),
                                hovertemplate="token %{x}: mean %{y:.3f} nats<extra></extra>")])
    _marks(fig, marks)
    fig.update_layout(title=dict(text="Loss of each token of the text by its position"), height=400, margin=MARGIN,
                      xaxis_title="position of the predicted token", yaxis_title="loss (nats)",
                      legend=dict(orientation="h", y=-0.2))
    return fig
