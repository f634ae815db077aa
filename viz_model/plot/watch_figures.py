"""Figures of the "watch attention form" lesson: training curves of one or more runs, the probe's attention maps at
one snapshot (runs side by side), and an animation of the maps over all snapshots (for an HTML export)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..lessons.watch_trainer import FIRST_SYMBOL, WatchResult, target_of
from .figure_style import WEIGHT_SCALE, escape
from .pe_lab_figures import attention_pair_figure

KIND_AXES = {"cross": ("decoder input", "source"), "decoder": ("decoder input", "decoder input"),
             "encoder": ("source", "source")}


def symbol(token_id: int) -> str:
    """A symbol id as a letter (A, B, ...); the special ids as their tokens."""
    specials = {0: "<pad>", 1: "<unk>", 2: "<s>", 3: "</s>"}
    return specials.get(token_id) or chr(ord("A") + token_id - FIRST_SYMBOL)


def axis_labels(result: WatchResult, kind: str) -> tuple[list[str], list[str]]:
    """Query and key labels of the probe's maps of `kind`."""
    return probe_labels(result.probe, result.config.task, kind, result.config.shift)


def probe_labels(probe: list[int], task: str, kind: str, shift: int = 1) -> tuple[list[str], list[str]]:
    """Query and key labels of the maps of `kind` for `probe`, teacher-forced on the task's answer."""
    source = [symbol(t) for t in probe] + ["</s>"]
    target = ["<s>"] + [symbol(t) for t in target_of(task, probe, shift)]
    return {"cross": (target, source), "decoder": (target, target), "encoder": (source, source)}[kind]


def head_mean(maps: Sequence[np.ndarray], layer: int, head: int | None) -> np.ndarray:
    """One layer's map: one head (0-based) or the mean over heads."""
    weights = maps[layer]
    return weights.mean(axis=0) if head is None else weights[head]


def curves_figure(runs: Mapping[str, WatchResult]) -> go.Figure:
    """Training loss and held-out sequence accuracy against the step, one line per run."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["training loss (cross-entropy per token)",
                                                        "held-out sequence accuracy (greedy, exact match)"],
                        horizontal_spacing=0.1)
    colours = ["#636efa", "#ef553b", "#00cc96", "#ab63fa"]
    for (name, result), colour in zip(runs.items(), colours):
        steps = [h["step"] for h in result.history]
        fig.add_trace(go.Scatter(x=steps[1:], y=[h["loss"] for h in result.history][1:], name=f"{name}: loss",
                                 mode="lines+markers", line=dict(color=colour),
                                 hovertemplate=f"{escape(name)}<br>step %{{x}}: loss %{{y:.4f}}<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=steps, y=[100 * h["sequence_accuracy"] for h in result.history],
                                 name=f"{name}: accuracy", mode="lines+markers", line=dict(color=colour, dash="dot"),
                                 hovertemplate=f"{escape(name)}<br>step %{{x}}: %{{y:.1f}}%<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title=dict(text="step"))
    fig.update_yaxes(range=[0, 100], title=dict(text="%"), row=1, col=2)
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=-0.25))
    return fig


def snapshot_figure(runs: Mapping[str, WatchResult], index: int, kind: str, layer: int,
                    head: int | None = None) -> go.Figure:
    """The probe's `kind` map of `layer` at snapshot `index` (clipped to each run's last), runs side by side."""
    panels = []
    for name, result in runs.items():
        shot = result.snapshots[min(index, len(result.snapshots) - 1)]
        queries, keys = axis_labels(result, kind)
        panels.append((f"{name}, step {shot.step}", head_mean(getattr(shot, kind), layer, head), queries, keys))
    which = "mean of heads" if head is None else f"head {head + 1}"
    return attention_pair_figure(panels, f"{kind} attention, layer {layer + 1}, {which}")


def animation_figure(result: WatchResult, kind: str, layer: int, head: int | None = None) -> go.Figure:
    """The maps of every snapshot as frames of one heatmap, with a play button and a step slider."""
    queries, keys = axis_labels(result, kind)
    frames = [go.Frame(data=[go.Heatmap(z=head_mean(getattr(s, kind), layer, head))], name=str(s.step))
              for s in result.snapshots]
    first = head_mean(getattr(result.snapshots[0], kind), layer, head)
    y_title, x_title = KIND_AXES[kind]
    fig = go.Figure(data=[go.Heatmap(z=first, x=keys, y=queries, colorscale=WEIGHT_SCALE, zmin=0.0, zmax=1.0,
                                     hovertemplate="query %{y}, key %{x}: %{z:.3f}<extra></extra>")], frames=frames)
    steps = [dict(method="animate", label=f.name, args=[[f.name], dict(mode="immediate", frame=dict(duration=0))])
             for f in frames]
    fig.update_layout(
        title=dict(text=escape(f"{result.config.task}: {kind} attention, layer {layer + 1}, over training")),
        yaxis=dict(autorange="reversed", title=dict(text=y_title)), xaxis=dict(title=dict(text=x_title)),
        height=520, margin=dict(l=10, r=10, t=60, b=10),
        updatemenus=[dict(type="buttons", x=0, y=-0.12, buttons=[dict(label="Play", method="animate", args=[
            None, dict(frame=dict(duration=300, redraw=True), fromcurrent=True)])])],
        sliders=[dict(active=0, currentvalue=dict(prefix="step "), steps=steps, y=-0.05)])
    return fig
