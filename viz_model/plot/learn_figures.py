"""Figures of the teaching pages (Learn): plain functions from library arrays to a `go.Figure`, no Streamlit.

Same conventions as `app.figures`: positions, layers and heads count from 0 in code and from 1 on screen except
where the paper counts from 0 (positions p, dimensions i); every label that can come from user or model text is
HTML-escaped with `figures.escape`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..config.checks import check_int
from ..nn.positional import ShiftCheck, dimension_axis, pair_dimensions, wave, wavelength_formula
from ..nn.shapes import Stage
from ..search.hypotheses import BeamTree
from .figure_style import HEAD_COLORS, WEIGHT_SCALE, _token_axis, escape

MARGIN = dict(l=10, r=10, t=60, b=10)
STATUS_COLORS = {"kept": "#3182bd", "finished": "#31a354", "pruned": "#c8c8c8", "chosen": "#e4572e"}


MAX_TREE_NODES = 40  # nodes drawn per step of the beam tree (a beam of 16 looks at 256 continuations)

def _marks(fig: go.Figure, marks: dict[str, float] | None, axis: str = "x") -> None:
    """Dashed lines at named positions (e.g. the training length, max_positions)."""
    for n, (label, value) in enumerate((marks or {}).items()):
        color = HEAD_COLORS[(n + 3) % len(HEAD_COLORS)]
        if axis == "x":
            fig.add_vline(x=value, line=dict(color=color, dash="dash", width=1.5), annotation_text=escape(label),
                          annotation_position="top right" if n % 2 == 0 else "bottom right")
        else:
            fig.add_hline(y=value, line=dict(color=color, dash="dash", width=1.5), annotation_text=escape(label),
                          annotation_position="top left" if n % 2 == 0 else "bottom left")


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
    _marks(fig, marks, axis="y")
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


# --- decoding step by step ---------------------------------------------------------------------------------------
def topk_figure(tokens: Sequence[str], probabilities: Sequence[float], chosen: str, step: int) -> go.Figure:
    """The top-k next-token probabilities at one step; the token the search chose in red."""
    colors = [STATUS_COLORS["chosen"] if t == chosen else "#9ecae1" for t in tokens]
    labels = [f"{escape(t)} " for t in tokens]
    fig = go.Figure(go.Bar(x=list(probabilities), y=list(range(len(tokens))), orientation="h", marker_color=colors,
                           customdata=labels, text=[f"{p:.3f}" for p in probabilities], textposition="outside",
                           hovertemplate="%{customdata}: p = %{x:.6f}<extra></extra>"))
    fig.update_layout(title=dict(text=escape(f"Step {step + 1}: the top {len(tokens)} next tokens (chosen: {chosen})")),
                      height=140 + 30 * len(tokens), margin=MARGIN,
                      xaxis=dict(title=dict(text="probability"), range=[0, max(probabilities) * 1.15 + 0.14]),
                      yaxis=dict(tickmode="array", tickvals=list(range(len(tokens))), ticktext=labels,
                                 autorange="reversed"))
    return fig


def cross_rows_figure(rows: np.ndarray, source_tokens: Sequence[str], layer: int, step: int, token: str,
                      kind_title: str = "Cross-attention", side: str = "source") -> go.Figure:
    """The cross-attention row of each head of one layer for the query that produced the new token (`kind_title`,
    `side`: another kind's row, such as a language model's self-attention over the tokens so far)."""
    heads, s = rows.shape
    custom = np.empty((heads, s), dtype=object)
    for j, t in enumerate(source_tokens):
        custom[:, j] = f"{j}: {escape(t)}"
    fig = go.Figure(go.Heatmap(z=rows, x=list(range(s)), y=list(range(heads)), customdata=custom,
                               colorscale=WEIGHT_SCALE, zmin=0.0, zmax=float(max(rows.max(), 1e-6)), xgap=1, ygap=1,
                               colorbar=dict(title=dict(text="weight")),
                               hovertemplate=f"head %{{y}}<br>{side} %{{customdata}}<br>weight %{{z:.4f}}"
                                             "<extra></extra>"))
    fig.update_layout(title=dict(text=escape(f"{kind_title}, layer {layer + 1}, step {step + 1} "
                                             f"(producing {token}): one row per head")),
                      height=150 + 34 * heads, margin=MARGIN, xaxis=_token_axis(source_tokens, f"{side} tokens"),
                      yaxis=dict(tickmode="array", tickvals=list(range(heads)),
                                 ticktext=[f"head {h + 1}" for h in range(heads)], autorange="reversed"))
    fig.update_xaxes(tickangle=-45 if s > 12 else 0)
    return fig


def causal_growth_figure(labels: Sequence[str], step: int) -> go.Figure:
    """The decoder's causal mask up to step t: rows 0..t exist (row t is new), later rows are not computed yet."""
    n = len(labels)
    z = np.full((n, n), np.nan)
    text = [[""] * n for _ in range(n)]
    for i in range(min(step + 1, n)):
        for j in range(n):
            allowed = j <= i
            z[i, j] = (2.0 if i == step else 1.0) if allowed else 0.0
            text[i][j] = "" if allowed else "−∞"
    fig = go.Figure(go.Heatmap(z=z, x=list(range(n)), y=list(range(n)), text=text, texttemplate="%{text}",
                               colorscale=[[0, "#d9d9d9"], [0.5, "#9ecae1"], [1, "#e4572e"]], zmin=0, zmax=2,
                               showscale=False, xgap=1, ygap=1,
                               hovertemplate="query %{y} → key %{x}<extra></extra>"))
    fig.update_layout(title=dict(text=f"Causal mask after step {step + 1}: the new row (red) sees keys 0..{step}"),
                      height=max(300, min(640, 140 + 20 * n)), margin=MARGIN,
                      xaxis=_token_axis(labels, "keys (decoder inputs)"),
                      yaxis=_token_axis(labels, "queries", reverse=True), plot_bgcolor="rgba(0,0,0,0)")
    fig.update_xaxes(tickangle=-45 if n > 12 else 0)
    return fig


def beam_tree_figure(tree: BeamTree, piece: Callable[[int], str], per_parent: int | None = None) -> go.Figure:
    """The hypotheses of every step: kept (blue), finished (green), pruned (grey), the chosen path in red.

    Each column is a step; each node is a continuation looked at (per hypothesis its `per_parent` best, default
    the beam size, plus every kept or finished one); hover shows the cumulative log-probability and the
    length-penalised score.
    """
    per_parent = per_parent or tree.beam
    penalty = "|Y|^α" if tree.rule == "transformers" else "((5 + |Y|) / 6)^α"
    chosen = set(tree.chosen_path)
    alive_y: dict[int, float] = {0: 0.0}  # row of the step being drawn -> y of its node
    hidden = 0  # pruned continuations left out to keep a step's column within MAX_TREE_NODES
    nodes: list[dict[str, Any]] = []
    edges: dict[str, tuple[list[Any], list[Any]]] = {s: ([], []) for s in STATUS_COLORS}
    for s in tree.steps:
        groups: dict[int, list[int]] = {}
        for i, c in enumerate(s.candidates):
            groups.setdefault(c.parent, []).append(i)
        shown: list[int] = []
        for parent in sorted(groups, key=lambda r: alive_y.get(r, 0.0)):
            ranked = sorted(groups[parent], key=lambda i: -s.candidates[i].log_prob)
            shown += [i for rank, i in enumerate(ranked)
                      if rank < per_parent or s.candidates[i].status != "pruned" or (s.step, i) in chosen]
        if len(shown) > MAX_TREE_NODES:  # a wide beam: leave out the least likely pruned continuations
            spare = sorted((i for i in shown if s.candidates[i].status == "pruned" and (s.step, i) not in chosen),
                           key=lambda i: s.candidates[i].log_prob)
            dropped = set(spare[:len(shown) - MAX_TREE_NODES])
            hidden += len(dropped)
            shown = [i for i in shown if i not in dropped]
        next_y: dict[int, float] = {}
        for slot, i in enumerate(shown):
            c = s.candidates[i]
            y = slot - (len(shown) - 1) / 2
            status = "chosen" if (s.step, i) in chosen else c.status
            parent_y = alive_y.get(c.parent, 0.0)
            xs, ys = edges[status]
            xs += [s.step - 1, s.step, None]
            ys += [parent_y, y, None]
            if c.row is not None:
                next_y[c.row] = y
            prefix = "".join(piece(t) for t in s.alive[c.parent][-4:])
            nodes.append({"x": s.step, "y": y, "status": status, "text": escape(piece(c.token)),
                          "hover": f"<b>{escape(piece(c.token))}</b> (step {s.step + 1}, {c.status})<br>after …"
                                   f"{escape(prefix)}<br>log p = {c.log_prob:.3f}<br>score = log p / {penalty} = "
                                   f"{c.score:.3f}"})
        alive_y = next_y
    fig = go.Figure()
    order = ("pruned", "kept", "finished", "chosen")
    names = {"pruned": "pruned", "kept": "kept in the beam", "finished": "finished (&lt;/s&gt; or length limit)",
             "chosen": "chosen translation"}
    for status in order:
        xs, ys = edges[status]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                     line=dict(color=STATUS_COLORS[status], width=3 if status == "chosen" else 1)))
    fig.add_trace(go.Scatter(x=[-1], y=[0], mode="markers+text", text=["&lt;s&gt;"], textposition="middle left",
                             marker=dict(size=10, color="#31333f"), hovertemplate="start: &lt;s&gt;<extra></extra>",
                             showlegend=False))
    for status in order:
        group = [n for n in nodes if n["status"] == status]
        if not group:
            continue
        fig.add_trace(go.Scatter(
            x=[n["x"] for n in group], y=[n["y"] for n in group], mode="markers+text",
            text=[n["text"] for n in group], textposition="middle right", hovertext=[n["hover"] for n in group],
            hovertemplate="%{hovertext}<extra></extra>", name=names[status],
            textfont=dict(size=10, color="#aaaaaa" if status == "pruned" else "#31333f"),
            marker=dict(size=11 if status == "chosen" else 8, color=STATUS_COLORS[status],
                        line=dict(width=0))))
    widest = max((sum(1 for n in nodes if n["x"] == s.step) for s in tree.steps), default=1)
    fig.update_layout(
        title=dict(text=f"Beam search tree ({'as transformers' if tree.rule == 'transformers' else 'this project'}'s "
                        f"rule): beam {tree.beam}, α {tree.alpha:g}, {len(tree.steps)} steps, "
                        f"{len(tree.finished)} finished hypotheses"
                        + (f" ({hidden} least likely pruned continuations not drawn)" if hidden else "")),
        height=max(360, 120 + 26 * widest), margin=dict(l=10, r=10, t=60, b=10), hovermode="closest",
        xaxis=dict(title=dict(text="step"), tickmode="array", tickvals=list(range(-1, len(tree.steps))),
                   ticktext=["start"] + [str(s.step + 1) for s in tree.steps], showgrid=False, zeroline=False,
                   range=[-1.6, len(tree.steps) - 0.2]),
        yaxis=dict(visible=False, autorange="reversed"), plot_bgcolor="rgba(0,0,0,0)",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))
    return fig


# --- the training recipe -----------------------------------------------------------------------------------------
def lr_figure(steps: np.ndarray, lr: np.ndarray, label: str, logged: pd.DataFrame | None = None,
              warmup: int | None = None, cooldown_start: int | None = None) -> go.Figure:
    """The schedule for the chosen settings; the learning rate the shipped model logged, as dots."""
    fig = go.Figure(go.Scatter(x=steps, y=lr, mode="lines", name=escape(label), line=dict(color="#636efa"),
                               hovertemplate="step %{x}<br>lr %{y:.3e}<extra></extra>"))
    if logged is not None and len(logged):
        fig.add_trace(go.Scatter(x=logged["step"], y=logged["lr"], mode="markers", name="the model's logged lr",
                                 marker=dict(color="#e4572e", size=6),
                                 hovertemplate="logged at step %{x}<br>lr %{y:.3e}<extra></extra>"))
    if warmup:
        fig.add_vline(x=warmup, line=dict(color="#999", dash="dot"), annotation_text=f"warm-up {warmup}")
    if cooldown_start is not None:
        fig.add_vline(x=cooldown_start, line=dict(color="#999", dash="dot"), annotation_text="cooldown",
                      annotation_position="top left")
    title = "Learning rate: linear warm-up, then ∝ 1/√step" + (
        ", then a linear cooldown to zero" if cooldown_start is not None else "")
    fig.update_layout(title=dict(text=title), height=380, margin=MARGIN,
                      xaxis=dict(title=dict(text="step")), yaxis=dict(title=dict(text="learning rate"),
                                                                         exponentformat="e"),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def smoothing_figure(target: np.ndarray, correct: int, shown: int = 40) -> go.Figure:
    """The label-smoothed target distribution (the correct token and up to `shown` others)."""
    vocab = len(target)
    others = [i for i in range(vocab) if i != correct][:max(0, shown - 1)]
    ids = sorted([correct] + others)
    colors = [STATUS_COLORS["chosen"] if i == correct else "#9ecae1" for i in ids]
    fig = go.Figure(go.Bar(x=[str(i) for i in ids], y=target[ids], marker_color=colors,
                           hovertemplate="token %{x}: q = %{y:.6f}<extra></extra>"))
    hidden = vocab - len(ids)
    title = (f"Target distribution: the correct token {correct} gets {target[correct]:.4f}, every other "
             f"{target[others[0]] if others else 0:.2e}" + (f" ({hidden:,} more tokens not drawn)" if hidden else ""))
    fig.update_layout(title=dict(text=title), height=340, margin=MARGIN,
                      xaxis=dict(title=dict(text="token id"), type="category"),
                      yaxis=dict(title=dict(text="target probability q"), range=[0, 1.05]))
    return fig


def training_curves_figure(events: Sequence[dict[str, Any]], perplexity: bool = False) -> go.Figure:
    """Loss (train, val), validation BLEU (`perplexity`: exp(validation NLL), a language model's), tokens/s and
    learning rate against the step, from the run log."""
    train = pd.DataFrame([e for e in events if e.get("event") == "train" and "step" in e])
    val = pd.DataFrame([e for e in events if e.get("event") == "val" and "step" in e])
    if perplexity and "val_loss" in val:
        val["val_perplexity"] = np.exp(val["val_loss"])
    second = "validation perplexity" if perplexity else "validation BLEU"
    fig = make_subplots(rows=2, cols=2, subplot_titles=["loss (per target token)", second,
                                                        "training speed (target tokens/s)", "learning rate"],
                        vertical_spacing=0.16, horizontal_spacing=0.08)

    def line(frame: pd.DataFrame, column: str, name: str, color: str, row: int, col: int, mode: str = "lines"):
        if len(frame) and column in frame:
            part = frame.dropna(subset=[column])
            fig.add_trace(go.Scatter(x=part["step"], y=part[column], mode=mode, name=name, line=dict(color=color),
                                     hovertemplate=f"{name}<br>step %{{x}}: %{{y:.4g}}<extra></extra>"),
                          row=row, col=col)

    line(train, "loss", "train loss (label-smoothed)", "#636efa", 1, 1)
    line(train, "nll", "train NLL", "#00cc96", 1, 1)
    line(val, "val_loss", "validation NLL", "#ef553b", 1, 1, "lines+markers")
    line(val, "val_perplexity" if perplexity else "val_bleu", second, "#ab63fa", 1, 2, "lines+markers")
    line(train, "tokens_per_s", "tokens/s", "#ffa15a", 2, 1)
    line(train, "lr", "learning rate", "#19d3f3", 2, 2)
    fig.update_xaxes(title=dict(text="step"))
    fig.update_layout(title=dict(text=f"Training curves from the run log ({len(train)} train, {len(val)} validation "
                                      "events)"), height=620, margin=dict(l=10, r=10, t=80, b=10),
                      legend=dict(orientation="h", y=-0.12))
    return fig


def architecture_figure(stages: Sequence[Stage], encoder_layers: int, decoder_layers: int, norm: str) -> go.Figure:
    """A block diagram of the loaded model: encoder (left) and decoder (right), one layer of each drawn, with the
    tensor shape of every stage for the sentence; "× N" from the config."""
    def shape_of(part_prefix: str, stage: str) -> str:
        for s in stages:
            if s.part.startswith(part_prefix) and s.stage.startswith(stage):
                return "(" + ", ".join(str(v) for v in s.shape) + ")"
        return ""

    add_norm = "Add & Norm (post-LN)" if norm == "post" else "Norm → sublayer → Add (pre-LN)"
    encoder = [("source ids", shape_of("encoder", "source token ids")),
               ("embedding × √d + PE", shape_of("encoder", "+ positional")),
               ("multi-head self-attention", "weights " + shape_of("encoder layer 1", "self-attention weights")),
               (add_norm, shape_of("encoder layer 1", "heads concatenated")),
               ("feed-forward", "hidden " + shape_of("encoder layer 1", "feed-forward hidden")),
               (add_norm, shape_of("encoder layer 1", "feed-forward output"))]
    decoder = [("decoder input ids", shape_of("decoder", "decoder input ids")),
               ("embedding × √d + PE", shape_of("decoder", "embedding")),
               ("masked self-attention", "weights " + shape_of("decoder layer 1", "masked self-attention")),
               (add_norm, shape_of("decoder layer 1", "heads concatenated")),
               ("cross-attention", "weights " + shape_of("decoder layer 1", "cross-attention weights")),
               (add_norm, shape_of("decoder layer 1", "heads concatenated")),
               ("feed-forward", "hidden " + shape_of("decoder layer 1", "feed-forward hidden")),
               (add_norm, shape_of("decoder layer 1", "feed-forward output")),
               ("linear → logits", shape_of("output", "logits")),
               ("softmax", shape_of("output", "softmax"))]
    fig = go.Figure()
    colors = {"attention": "#fde0c5", "feed": "#c6dbef", "Add": "#e5e5e5", "Norm": "#e5e5e5", "emb": "#d9f0d3",
              "ids": "#ffffff", "linear": "#dadaeb", "softmax": "#dadaeb"}

    def color_of(label: str) -> str:
        for key, value in colors.items():
            if key in label:
                return value
        return "#ffffff"

    def column(blocks: list[tuple[str, str]], x: float, layer_rows: tuple[int, int], repeat: int, name: str) -> None:
        for row, (label, shape) in enumerate(blocks):
            y = -row * 1.0
            fig.add_shape(type="rect", x0=x - 1.6, x1=x + 1.6, y0=y - 0.38, y1=y + 0.38,
                          fillcolor=color_of(label), line=dict(color="#555", width=1))
            fig.add_annotation(x=x, y=y, text=f"<b>{escape(label)}</b><br>{escape(shape)}", showarrow=False,
                               font=dict(size=11))
            if row:
                fig.add_annotation(x=x, y=y + 0.38, ax=x, ay=y + 0.62, xref="x", yref="y", axref="x", ayref="y",
                                   showarrow=True, arrowhead=2, arrowsize=1, arrowwidth=1, text="")
        top, bottom = layer_rows
        fig.add_shape(type="rect", x0=x - 1.8, x1=x + 1.8, y0=-bottom - 0.5, y1=-top + 0.5,
                      line=dict(color="#e4572e", width=2, dash="dash"))
        fig.add_annotation(x=x + 1.85, y=-(top + bottom) / 2, text=f"<b>× {repeat}</b><br>{name} layers",
                           showarrow=False, xanchor="left", font=dict(color="#e4572e"))

    column(encoder, 0.0, (2, 5), encoder_layers, "encoder")
    column(decoder, 5.5, (2, 7), decoder_layers, "decoder")
    # the encoder output feeds every decoder layer's cross-attention (its keys and values)
    fig.add_annotation(x=5.5 - 1.6, y=-4.0, ax=0.0 + 1.6, ay=-5.0, xref="x", yref="y", axref="x", ayref="y",
                       showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="#e4572e", text="")
    fig.add_annotation(x=2.75, y=-4.75, text="encoder output → K, V", showarrow=False, font=dict(size=10,
                                                                                                  color="#e4572e"))
    fig.update_layout(title=dict(text="The loaded model, with the tensor shapes for this sentence (batch 1)"),
                      height=90 + 64 * len(decoder), margin=dict(l=10, r=10, t=60, b=10),
                      xaxis=dict(visible=False, range=[-2.2, 9.6]),
                      yaxis=dict(visible=False, range=[-len(decoder) + 0.4, 0.6]),
                      plot_bgcolor="rgba(0,0,0,0)", showlegend=False)
    return fig


def complexity_figure(data: pd.DataFrame) -> go.Figure:
    """Measured time and peak activation memory of one layer of each kind against the sequence length (log–log)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["time per forward pass (ms)", "peak activation memory (MiB)"],
                        horizontal_spacing=0.1)
    for n, (name, part) in enumerate(data.groupby("layer", sort=False)):
        color = HEAD_COLORS[n % len(HEAD_COLORS)]
        for c, column in enumerate(("ms", "peak_mib"), start=1):
            fig.add_trace(go.Scatter(x=part["n"], y=part[column], mode="lines+markers", name=escape(name),
                                     legendgroup=name, showlegend=c == 1, line=dict(color=color),
                                     hovertemplate=f"{escape(name)}<br>n = %{{x}}<br>%{{y:.4g}}<extra></extra>"),
                          row=1, col=c)
    fig.update_xaxes(type="log", title=dict(text="sequence length n"))
    fig.update_yaxes(type="log")
    fig.update_layout(title=dict(text="One layer, measured on this machine"), height=420,
                      margin=dict(l=10, r=10, t=80, b=10), legend=dict(orientation="h", y=-0.2))
    return fig
