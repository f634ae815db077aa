"""The Positional page's encoding lab: the PE matrix, chosen dimensions, wavelengths, PE(p)·PE(q), the shift
matrix and its error, and maps side by side (no Streamlit; positions and dimensions count from 0, as the paper).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..config.checks import check_int
from ..nn.positional import ShiftCheck, dimension_axis, pair_dimensions, wave, wavelength_formula
from .figure_style import HEAD_COLORS, MARGIN, WEIGHT_SCALE, _marks, _token_axis, escape


# --- positional encoding lab -------------------------------------------------------------------------------------
def pe_matrix_figure(table: np.ndarray, title: str, marks: dict[str, float] | None = None,
                     layout: str = "interleaved") -> go.Figure:
    """The PE matrix: positions (rows, from 0) × dimensions (columns), labelled for the model's `layout`."""
    n, d = table.shape
    kinds = np.array([[wave(dim, d, layout) for dim in range(d)]] * n)
    fig = go.Figure(go.Heatmap(z=table, x=list(range(d)), y=list(range(n)), colorscale="RdBu_r", zmid=0.0,
                               customdata=kinds, colorbar=dict(title=dict(text="PE")),
                               hovertemplate="position %{y}<br>dimension %{x} (%{customdata})<br>PE %{z:.6f}"
                                             "<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=460, margin=MARGIN,
                      xaxis=dict(title=dict(text=dimension_axis(layout)), showgrid=False),
                      yaxis=dict(title=dict(text="position p"), autorange="reversed", showgrid=False))
    _marks(fig, marks, axis="y")
    return fig


def dimension_curves_figure(table: np.ndarray, dims: Sequence[int], marks: dict[str, float] | None = None,
                            title: str = "Chosen dimensions over the positions", layout: str = "interleaved"
                            ) -> go.Figure:
    """PE(p, dim) against p for each chosen dimension, with dashed marks (e.g. where training stopped)."""
    length, d = table.shape
    fig = go.Figure()
    for n, dim in enumerate(dims):
        check_int("dimension", dim, 0, d - 1, error=ValueError, kinds=(int, np.integer),
                  message=f"dimension {dim} is out of range (d_model = {d})")
        fig.add_trace(go.Scatter(x=np.arange(length), y=table[:, dim], mode="lines",
                                 name=f"dim {dim} ({wave(dim, d, layout)})",
                                 line=dict(color=HEAD_COLORS[n % len(HEAD_COLORS)]),
                                 hovertemplate=f"dim {dim}<br>position %{{x}}<br>%{{y:.6f}}<extra></extra>"))
    _marks(fig, marks)
    fig.update_layout(title=dict(text=escape(title)), height=380, margin=MARGIN, hovermode="closest",
                      xaxis=dict(title=dict(text="position p")), yaxis=dict(title=dict(text="PE value")))
    return fig


def wavelength_figure(wavelengths: np.ndarray, marks: dict[str, float] | None = None, layout: str = "interleaved",
                      frequencies: str = "paper") -> go.Figure:
    """Wavelength of each sin/cos pair i on a log axis (the geometric progression 2π … 10000·2π), its dimensions as
    the model's `layout` places them; the bounds and marks are named in the legend."""
    pairs = np.arange(len(wavelengths))
    d_model = 2 * len(wavelengths)
    dims = [pair_dimensions(i, d_model, layout) for i in pairs]
    fig = go.Figure(go.Scatter(x=pairs, y=wavelengths, mode="lines+markers", name="wavelength of pair i",
                               marker=dict(size=5, color="#636efa"),
                               hovertemplate="pair i = %{x} (sin in dim %{customdata[0]}, cos in dim "
                                             "%{customdata[1]})<br>wavelength %{y:.4g} positions<extra></extra>",
                               customdata=dims))
    for value, label, dash in ((2 * np.pi, "2π (the shortest)", "dot"), (10000 * 2 * np.pi, "10000·2π (the longest)",
                                                                         "dash")):
        fig.add_trace(go.Scatter(x=[pairs[0], pairs[-1]], y=[value, value], mode="lines", name=label,
                                 line=dict(color="#999", dash=dash), hoverinfo="skip"))
    _marks(fig, marks, axis="y", log=True)
    title = f"Wavelength of each sin/cos pair (log scale): {wavelength_formula(frequencies)}"
    fig.update_layout(title=dict(text=title),
                      height=380, margin=MARGIN, legend=dict(orientation="h", yanchor="top", y=-0.2),
                      xaxis=dict(title=dict(text="pair i: " + ("dimensions i (sin) and d_model/2 + i (cos)"
                                                               if layout == "halves" else "dimensions 2i (sin) and "
                                                               "2i + 1 (cos)"))),
                      yaxis=dict(title=dict(text="wavelength (positions)"), type="log",
                                 range=[np.log10(2 * np.pi) - 0.3, np.log10(10000 * 2 * np.pi) + 0.3]))
    return fig


def similarity_figure(similarity: np.ndarray, title: str, marks: dict[str, float] | None = None) -> go.Figure:
    """PE(p) · PE(q) for every pair of positions."""
    n = similarity.shape[0]
    fig = go.Figure(go.Heatmap(z=similarity, x=list(range(n)), y=list(range(n)), colorscale="RdBu_r", zmid=0.0,
                               colorbar=dict(title=dict(text="dot")),
                               hovertemplate="PE(%{y}) · PE(%{x}) = %{z:.4f}<extra></extra>"))
    fig.update_layout(title=dict(text=escape(title)), height=460, margin=MARGIN,
                      xaxis=dict(title=dict(text="position q"), showgrid=False, scaleanchor="y"),
                      yaxis=dict(title=dict(text="position p"), autorange="reversed", showgrid=False))
    for n_mark, (label, value) in enumerate((marks or {}).items()):
        color = HEAD_COLORS[(n_mark + 3) % len(HEAD_COLORS)]
        fig.add_vline(x=value, line=dict(color=color, dash="dash"), annotation_text=escape(label))
        fig.add_hline(y=value, line=dict(color=color, dash="dash"))
    return fig


def profile_figure(profile: pd.DataFrame, d_model: int) -> go.Figure:
    """PE(p)·PE(q) against |p − q|: the mean over pairs, with the min–max band (flat for sinusoids)."""
    x = profile["distance"].to_numpy()
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]),
                             y=np.concatenate([profile["max"].to_numpy(), profile["min"].to_numpy()[::-1]]),
                             fill="toself", fillcolor="rgba(99,110,250,0.2)", line=dict(width=0), hoverinfo="skip",
                             name="min–max over pairs"))
    fig.add_trace(go.Scatter(x=x, y=profile["mean"], mode="lines", name="mean over pairs",
                             line=dict(color="#636efa"), customdata=profile[["min", "max", "pairs"]].to_numpy(),
                             hovertemplate="|p − q| = %{x}<br>mean %{y:.4f}<br>min %{customdata[0]:.4f}, max "
                                           "%{customdata[1]:.4f} over %{customdata[2]} pairs<extra></extra>"))
    fig.add_hline(y=d_model / 2, line=dict(color="#999", dash="dot"), annotation_text=f"d_model/2 = {d_model / 2:g}",
                  annotation_position="top right")
    fig.update_layout(title=dict(text="PE(p)·PE(q) against the distance |p − q|: nearby positions look alike"),
                      height=360, margin=MARGIN, xaxis=dict(title=dict(text="|p − q|")),
                      yaxis=dict(title=dict(text="PE(p)·PE(q)")), legend=dict(orientation="h", y=-0.2))
    return fig


def shift_matrix_figure(matrix: np.ndarray, k: int, dims: int) -> go.Figure:
    """The top-left ``dims × dims`` corner of M_k: 2×2 rotation blocks on the diagonal, zeros elsewhere."""
    dims = max(2, min(dims, matrix.shape[0]))
    corner = matrix[:dims, :dims]
    fig = go.Figure(go.Heatmap(z=corner, x=list(range(dims)), y=list(range(dims)), colorscale="RdBu_r", zmid=0.0,
                               zmin=-1, zmax=1, xgap=1 if dims <= 32 else 0, ygap=1 if dims <= 32 else 0,
                               text=[[f"{v:.2f}" if v else "" for v in row] for row in corner] if dims <= 16 else None,
                               texttemplate="%{text}" if dims <= 16 else None,
                               hovertemplate="M[%{y}, %{x}] = %{z:.6f}<extra></extra>",
                               colorbar=dict(title=dict(text="value"))))
    fig.update_layout(title=dict(text=f"M_k for k = {k}: dimensions 0–{dims - 1} of {matrix.shape[0]} "
                                      "(one 2×2 rotation per sin/cos pair)"),
                      height=440, margin=MARGIN, xaxis=dict(title=dict(text="input dimension"), showgrid=False,
                                                            scaleanchor="y"),
                      yaxis=dict(title=dict(text="output dimension"), autorange="reversed", showgrid=False))
    return fig


def shift_error_figure(check: ShiftCheck) -> go.Figure:
    """max_i |M_k PE(p) − PE(p + k)|_i for every p, float32 (as the model adds) and float64 tables."""
    fig = go.Figure()
    floor = 1e-18  # a log axis cannot show an exact 0
    for values, name, color in ((check.error32, "float32 table", "#ef553b"), (check.error64, "float64 table",
                                                                              "#636efa")):
        fig.add_trace(go.Scatter(x=check.positions, y=np.maximum(values, floor), mode="lines", name=name,
                                 line=dict(color=color), customdata=values,
                                 hovertemplate="p = %{x}<br>error %{customdata:.3e}<extra>" + name + "</extra>"))
    fig.update_layout(title=dict(text=f"Numerical error of M_k PE(p) = PE(p + {check.k}) for every position p"),
                      height=340, margin=MARGIN, xaxis=dict(title=dict(text="position p")),
                      yaxis=dict(title=dict(text="max |error| over dimensions"), type="log", exponentformat="e"),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def side_by_side_figure(panels: Sequence[tuple[str, np.ndarray]], colorscale: str = "RdBu_r", height: int = 420,
                        x_title: str = "dimension", y_title: str = "position") -> go.Figure:
    """Heatmaps next to each other (e.g. learned vs sinusoidal PE), one colour bar each."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[escape(t) for t, _ in panels],
                        horizontal_spacing=0.1)
    for c, (title, z) in enumerate(panels, start=1):
        fig.add_trace(go.Heatmap(z=z, colorscale=colorscale, zmid=0.0 if colorscale == "RdBu_r" else None,
                                 colorbar=dict(x=c / len(panels) - 0.02, len=0.9, thickness=10),
                                 hovertemplate=f"{escape(title)}<br>{y_title} %{{y}}, {x_title} %{{x}}: "
                                               "%{z:.4f}<extra></extra>", name=escape(title)), row=1, col=c)
        fig.update_yaxes(autorange="reversed", title=dict(text=y_title), showgrid=False, row=1, col=c)
        fig.update_xaxes(title=dict(text=x_title), showgrid=False, row=1, col=c)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=70, b=10))
    return fig


def attention_pair_figure(panels: Sequence[tuple[str, np.ndarray, Sequence[str], Sequence[str]]],
                          title: str) -> go.Figure:
    """Attention maps side by side (e.g. the original sentence and the experiment), each with its own tokens."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[escape(p[0]) for p in panels],
                        horizontal_spacing=0.12)
    longest = 1
    for c, (name, weights, queries, keys) in enumerate(panels, start=1):
        q, k = weights.shape
        longest = max(longest, q)
        custom = np.empty((q, k, 2), dtype=object)
        for i, t in enumerate(queries):
            custom[i, :, 0] = f"{i}: {escape(t)}"
        for j, t in enumerate(keys):
            custom[:, j, 1] = f"{j}: {escape(t)}"
        fig.add_trace(go.Heatmap(z=weights, x=list(range(k)), y=list(range(q)), customdata=custom,
                                 colorscale=WEIGHT_SCALE, zmin=0.0, zmax=1.0, showscale=c == len(panels),
                                 colorbar=dict(title=dict(text="weight")), name=escape(name),
                                 hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.4f}"
                                               "<extra></extra>"), row=1, col=c)
        fig.update_xaxes(_token_axis(keys, "keys"), row=1, col=c)
        fig.update_xaxes(tickangle=-60, row=1, col=c)
        fig.update_yaxes(_token_axis(queries, "queries" if c == 1 else "", reverse=True), row=1, col=c)
    fig.update_layout(title=dict(text=escape(title)), height=max(380, 200 + 22 * longest),
                      margin=dict(l=10, r=10, t=90, b=10), plot_bgcolor="rgba(0,0,0,0)")
    return fig
