"""The training recipe's figures: the learning-rate schedule, the label-smoothed target, the run's curves, the
model's block diagram and the measured cost of a layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..nn.shapes import Stage
from .decoding_figures import STATUS_COLORS
from .figure_style import HEAD_COLORS, MARGIN, escape


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


def training_curves_figure(events: Sequence[dict[str, Any]], perplexity: bool = False,
                           scored: str = "target token") -> go.Figure:
    """Loss (train, val), validation BLEU (`perplexity`: exp(validation NLL), a language model's or an encoder's),
    tokens/s and learning rate against the step, from the run log; `scored`: what the loss is per (an encoder's:
    "masked token")."""
    train = pd.DataFrame([e for e in events if e.get("event") == "train" and "step" in e])
    val = pd.DataFrame([e for e in events if e.get("event") == "val" and "step" in e])
    if perplexity and "val_loss" in val:
        val["val_perplexity"] = np.exp(val["val_loss"])
    second = "validation perplexity" if perplexity else "validation BLEU"
    fig = make_subplots(rows=2, cols=2, subplot_titles=[f"loss (per {scored})", second,
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
    colors = {"attention": "#fde0c5", "feed": "#c6dbef", "Add": "#e5e5e5", "Norm": "#e5e5e5", "emb": "#d9f0d3",
              "ids": "#ffffff", "linear": "#dadaeb", "softmax": "#dadaeb"}
    shapes: list[dict] = []  # set on the figure at once: adding 60-odd one by one re-validates them every time
    notes: list[dict] = []

    def color_of(label: str) -> str:
        for key, value in colors.items():
            if key in label:
                return value
        return "#ffffff"

    def column(blocks: list[tuple[str, str]], x: float, layer_rows: tuple[int, int], repeat: int, name: str) -> None:
        for row, (label, shape) in enumerate(blocks):
            y = -row * 1.0
            shapes.append(dict(type="rect", x0=x - 1.6, x1=x + 1.6, y0=y - 0.38, y1=y + 0.38,
                               fillcolor=color_of(label), line=dict(color="#555", width=1)))
            notes.append(dict(x=x, y=y, text=f"<b>{escape(label)}</b><br>{escape(shape)}", showarrow=False,
                              font=dict(size=11)))
            if row:
                notes.append(dict(x=x, y=y + 0.38, ax=x, ay=y + 0.62, xref="x", yref="y", axref="x", ayref="y",
                                  showarrow=True, arrowhead=2, arrowsize=1, arrowwidth=1, text=""))
        top, bottom = layer_rows
        shapes.append(dict(type="rect", x0=x - 1.8, x1=x + 1.8, y0=-bottom - 0.5, y1=-top + 0.5,
                           line=dict(color="#e4572e", width=2, dash="dash")))
        notes.append(dict(x=x + 1.85, y=-(top + bottom) / 2, text=f"<b>× {repeat}</b><br>{name} layers",
                          showarrow=False, xanchor="left", font=dict(color="#e4572e")))

    column(encoder, 0.0, (2, 5), encoder_layers, "encoder")
    column(decoder, 5.5, (2, 7), decoder_layers, "decoder")
    # the encoder output feeds every decoder layer's cross-attention (its keys and values)
    notes.append(dict(x=5.5 - 1.6, y=-4.0, ax=0.0 + 1.6, ay=-5.0, xref="x", yref="y", axref="x", ayref="y",
                      showarrow=True, arrowhead=2, arrowwidth=1.5, arrowcolor="#e4572e", text=""))
    notes.append(dict(x=2.75, y=-4.75, text="encoder output → K, V", showarrow=False,
                      font=dict(size=10, color="#e4572e")))
    fig = go.Figure()
    fig.layout.shapes, fig.layout.annotations = shapes, notes
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
