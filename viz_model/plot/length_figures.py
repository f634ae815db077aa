"""Figures of the length-generalisation experiment: accuracy by length per positional scheme with the trained
lengths shaded, and one head's attention maps per scheme for the probe at a length training never reached."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..lessons.position_experiment import LengthResult
from ..lessons.watch_trainer import target_of
from .figure_style import HEAD_COLORS, WEIGHT_SCALE, escape
from .watch_figures import KIND_AXES, head_mean, probe_labels

MEASURES = {"sequence_accuracy": "exact-sequence accuracy (greedy)",
            "token_accuracy": "token accuracy (teacher-forced)"}


def accuracy_figure(result: LengthResult, measure: str = "sequence_accuracy") -> go.Figure:
    """Accuracy against the test length, one line per scheme; the trained lengths shaded."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}")
    s = result.settings
    fig = go.Figure()
    fig.add_vrect(x0=s.min_length - 0.5, x1=s.max_length + 0.5, fillcolor="grey", opacity=0.15, line_width=0,
                  annotation_text="trained lengths", annotation_position="top left")
    for (name, run), colour in zip(result.runs.items(), HEAD_COLORS):
        fig.add_trace(go.Scatter(x=s.lengths, y=[100 * a for a in getattr(run, measure)], name=escape(name),
                                 mode="lines+markers", line=dict(color=colour),
                                 hovertemplate=f"{escape(name)}<br>length %{{x}}: %{{y:.1f}}%<extra></extra>"))
    fig.update_layout(title=dict(text=escape(f"{s.task}: {MEASURES[measure]} by length, {s.test_size} sequences "
                                             "per length")),
                      xaxis=dict(title=dict(text="sequence length (symbols)"), dtick=1),
                      yaxis=dict(title=dict(text="%"), range=[0, 102]), height=420,
                      margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=-0.2))
    return fig


def maps_figure(result: LengthResult, kind: str = "cross", layer: int = -1, head: int | None = 0) -> go.Figure:
    """The probe's `kind` map of one `layer` and `head` (None: the mean of heads), one panel per scheme, titled
    with whether the scheme's greedy answer was right."""
    if kind not in KIND_AXES:
        raise ValueError(f"kind must be one of {', '.join(KIND_AXES)}; got {kind!r}")
    s = result.settings
    if not -s.layers <= layer < s.layers:
        raise ValueError(f"layer must be in [{-s.layers}, {s.layers - 1}], got {layer}")
    if head is not None and not 0 <= head < s.heads:
        raise ValueError(f"head must be None (the mean) or in [0, {s.heads - 1}], got {head}")
    names = list(result.runs)
    cols = min(3, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    answer = target_of(s.task, result.probe)
    titles = [f"{n}: {'right' if result.runs[n].probe.output == answer else 'wrong'}" for n in names]
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[escape(t) for t in titles], horizontal_spacing=0.06,
                        vertical_spacing=0.12)
    queries, keys = probe_labels(result.probe, s.task, kind)
    for i, name in enumerate(names):
        row, col = divmod(i, cols)
        weights = head_mean(getattr(result.runs[name].probe, kind), layer, head)
        # positions on the axes, not the symbols: a repeated symbol would merge two rows or columns
        fig.add_trace(go.Heatmap(z=weights, x=list(range(len(keys))), y=list(range(len(queries))),
                                 colorscale=WEIGHT_SCALE, zmin=0.0, zmax=1.0, showscale=i == 0,
                                 colorbar=dict(title=dict(text="weight")), name=escape(name),
                                 hovertemplate=f"{escape(name)}<br>query %{{y}}, key %{{x}}: %{{z:.3f}}"
                                               "<extra></extra>"), row=row + 1, col=col + 1)
    y_title, x_title = KIND_AXES[kind]
    tick = dict(tickfont=dict(size=9), tickmode="array")
    fig.update_yaxes(autorange="reversed", tickvals=list(range(len(queries))), ticktext=[escape(q) for q in queries],
                     **tick)
    fig.update_xaxes(tickvals=list(range(len(keys))), ticktext=[escape(k) for k in keys], tickangle=0, **tick)
    fig.update_yaxes(title=dict(text=y_title), col=1)
    fig.update_xaxes(title=dict(text=x_title), row=rows)
    which = "mean of heads" if head is None else f"head {head + 1}"
    fig.update_layout(title=dict(text=escape(f"{kind} attention, layer {layer % s.layers + 1}, {which}, for a probe "
                                             f"of length {s.probe_length} (trained up to {s.max_length})")),
                      height=120 + 300 * rows, margin=dict(l=10, r=10, t=90, b=10))
    return fig
