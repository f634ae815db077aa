"""Decoding step by step: the top-k next tokens, a step's attention rows, the causal mask growing, the beam tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..search.hypotheses import BeamTree
from .figure_style import MARGIN, WEIGHT_SCALE, _token_axis, escape

STATUS_COLORS = {"kept": "#3182bd", "finished": "#31a354", "pruned": "#c8c8c8", "chosen": "#e4572e"}
MAX_TREE_NODES = 40  # nodes drawn per step of the beam tree (a beam of 16 looks at 256 continuations)


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
