"""Figures of the Analyze pages: plain functions from `viz_model.analysis` results to a `go.Figure`, no Streamlit.

Same conventions as `app.figures`: layers and heads count from 0 in code and from 1 on screen, every count comes
from the arrays or tables given (which come from the model's config or trace), and every label that can come from
user or model text is HTML-escaped with `figures.escape`. A head grid is one layer x head heatmap per attention
kind; each cell carries ``customdata = [kind, layer, head]`` (0-based) on an invisible marker, so a click selects it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.ablation import Head
from ..analysis.word_alignment import Link
from ..nn.kinds import KIND_TITLES
from .figure_style import HEAD_COLORS, escape
from .map_figures import KINDS, PREDICTED_ROWS, ROW_LABELS, AttentionMap, _links, map_heatmap

MARGIN = dict(l=10, r=10, t=80, b=10)
SELECTED_COLOR = "#e4572e"
GOLD_COLOR = "#31a354"


# --- tables -> layer x head grids -------------------------------------------------------------------------------
def table_grid(table: pd.DataFrame, column: str, layers: Mapping[str, int], heads: int) -> dict[str, np.ndarray]:
    """``{kind: (layers, heads)}`` arrays of `column` from a per-head table (kind, layer, head 0-based); cells the
    table does not fill are NaN. `layers` (kind -> layer count) and `heads` come from the model's config."""
    grids = {kind: np.full((count, heads), np.nan) for kind, count in layers.items()}
    for kind, layer, head, value in table[["kind", "layer", "head", column]].itertuples(index=False):
        grid = grids.get(kind)
        if grid is not None and 0 <= layer < grid.shape[0] and 0 <= head < heads:
            grid[int(layer), int(head)] = value
    return grids


def _ordered(values: Mapping[str, np.ndarray]) -> list[str]:
    unknown = [kind for kind in values if kind not in KINDS]
    if unknown or not values:
        raise ValueError(f"a head grid needs arrays for some of {', '.join(KINDS)}; got {list(values)}")
    return [kind for kind in KINDS if kind in values]


def _cell_text(kind: str, layer: int, head: int, value: float, value_name: str, label: str | None) -> str:
    shown = "not defined here" if np.isnan(value) else f"{value:.4f}"
    extra = f"<br>{escape(label)}" if label else ""
    return f"<b>{KIND_TITLES[kind]}</b><br>layer {layer + 1}, head {head + 1}<br>{escape(value_name)}: {shown}{extra}"


def head_grid(values: Mapping[str, np.ndarray], title: str, value_name: str, colorscale: str | list = "Viridis",
              selected: Collection[Head] = (), labels: Mapping[str, np.ndarray] | None = None,
              zmid: float | None = None, colorbar: dict | None = None, showscale: bool = True,
              hover_labels: Mapping[str, np.ndarray] | None = None, unit: bool = False) -> go.Figure:
    """One layer x head heatmap per kind (``values[kind]`` of shape ``(layers, heads)``, NaN = blank), side by side
    on one colour scale; `selected` heads are ringed, `labels` (same shapes, text) go into the cells and, unless
    `hover_labels` are given, the hovers. `unit`: a share of attention, coloured on the fixed scale 0 to 1."""
    kinds = _ordered(values)
    fig = make_subplots(rows=1, cols=len(kinds), subplot_titles=[escape(KIND_TITLES[k]) for k in kinds],
                        horizontal_spacing=0.06)
    finite = [v[np.isfinite(v)] for v in values.values() if np.isfinite(v).any()]
    low = float(min(v.min() for v in finite)) if finite else 0.0
    high = float(max(v.max() for v in finite)) if finite else 1.0
    if zmid is not None:
        span = max(abs(low - zmid), abs(high - zmid), 1e-9)
        low, high = zmid - span, zmid + span
    if unit:
        low, high = 0.0, 1.0
    for column, kind in enumerate(kinds, start=1):
        hovers = hover_labels if hover_labels is not None else labels
        _add_grid(fig, kind, np.asarray(values[kind], dtype=np.float64), column, value_name,
                  None if labels is None else labels.get(kind), selected,
                  None if hovers is None else hovers.get(kind))
    layers = max(np.shape(values[k])[0] for k in kinds)
    fig.update_layout(
        title=dict(text=escape(title)), height=150 + 46 * max(layers, 2), margin=MARGIN, hovermode="closest",
        clickmode="event+select", dragmode=False, plot_bgcolor="rgba(0,0,0,0)", showlegend=False,
        coloraxis=dict(colorscale=colorscale, cmin=low, cmax=high if high > low else low + 1e-9, showscale=showscale,
                       colorbar=colorbar or dict(title=dict(text=escape(value_name) + (
                           "" if unit or zmid is not None else "<br>(colours stretched<br>to this grid)")))))
    return fig


def _add_grid(fig: go.Figure, kind: str, z: np.ndarray, column: int, value_name: str, labels: np.ndarray | None,
              selected: Collection[Head], hovers: np.ndarray | None) -> None:
    layers, heads = z.shape
    text = None if labels is None else [[escape(t) for t in row] for row in labels]
    fig.add_trace(go.Heatmap(z=z, x=list(range(1, heads + 1)), y=list(range(1, layers + 1)), coloraxis="coloraxis",
                             text=text, texttemplate="%{text}" if text is not None else None,
                             textfont=dict(size=9), hoverinfo="skip", xgap=2, ygap=2, name=kind), row=1, col=column)
    cells = [(layer, head) for layer in range(layers) for head in range(heads)]
    hover = [_cell_text(kind, layer, head, z[layer, head], value_name,
                        None if hovers is None else str(hovers[layer][head])) for layer, head in cells]
    fig.add_trace(go.Scatter(x=[h + 1 for _, h in cells], y=[layer + 1 for layer, _ in cells], mode="markers",
                             customdata=[[kind, layer, head] for layer, head in cells], hovertext=hover,
                             hovertemplate="%{hovertext}<extra></extra>", name=f"{kind} heads",
                             marker=dict(size=18, color="rgba(0,0,0,0)")), row=1, col=column)
    ringed = [(layer, head) for k, layer, head in selected if k == kind and layer < layers and head < heads]
    if ringed:
        fig.add_trace(go.Scatter(x=[h + 1 for _, h in ringed], y=[layer + 1 for layer, _ in ringed], mode="markers",
                                 hoverinfo="skip", name=f"{kind} selected",
                                 marker=dict(size=20, symbol="square-open", color=SELECTED_COLOR,
                                             line=dict(width=3, color=SELECTED_COLOR))), row=1, col=column)
    fig.update_xaxes(title=dict(text="head"), tickmode="array", tickvals=list(range(1, heads + 1)), showgrid=False,
                     zeroline=False, range=[0.5, heads + 0.5], row=1, col=column)
    fig.update_yaxes(title=dict(text="layer") if column == 1 else None, tickmode="array",
                     tickvals=list(range(1, layers + 1)), autorange="reversed", showgrid=False, zeroline=False,
                     row=1, col=column)


def role_grid(table: pd.DataFrame, layers: Mapping[str, int], heads: int, title: str) -> go.Figure:
    """Each head's role (the ``role`` column of `head_roles`) as a coloured cell holding the role's number (names
    do not fit a cell): the colour bar reads "1 diagonal", ..., the hover names the role."""
    roles = list(dict.fromkeys(table["role"]))
    codes = table.assign(code=[roles.index(r) for r in table["role"]])
    values = table_grid(codes, "code", layers, heads)

    def lookup(names: list[str]) -> dict[str, np.ndarray]:
        array = np.array([*names, ""], dtype=object)
        return {kind: array[np.where(np.isnan(v), len(roles), v).astype(int)] for kind, v in values.items()}

    count = max(len(roles), 1)
    scale = []
    for i in range(count):
        color = HEAD_COLORS[i % len(HEAD_COLORS)]
        scale += [[i / count, color], [(i + 1) / count, color]]
    colorbar = dict(title=dict(text="role"), tickmode="array", tickvals=[(i + 0.5) * (count - 1) / count
                                                                          for i in range(count)],
                    ticktext=[f"{i + 1} {escape(r)}" for i, r in enumerate(roles)])
    fig = head_grid(values, title, "role", scale, labels=lookup([str(i + 1) for i in range(len(roles))]),
                    colorbar=colorbar, hover_labels=lookup([f"role {i + 1}: {r}" for i, r in enumerate(roles)]))
    fig.update_layout(coloraxis=dict(cmin=0, cmax=max(count - 1, 1e-9)))
    return fig


# --- token x token maps ------------------------------------------------------------------------------------------
def column_heatmap(amap: AttentionMap) -> go.Figure:
    """The explorer's head heatmap for a narrow column (several side by side): key labels slanted so they never
    overlap."""
    fig = map_heatmap(amap)
    fig.update_xaxes(tickangle=-60)
    return fig


def token_map_figure(weights: np.ndarray, queries: Sequence[str], keys: Sequence[str], kind: str, layer: int,
                     title: str) -> go.Figure:
    """A ``(queries, keys)`` map (rollout, flow, a head-mean map) drawn like the explorer's head heatmap."""
    amap = AttentionMap(np.asarray(weights, dtype=np.float32), list(queries), list(keys), [""] * len(queries), kind,
                        layer, "mean", "piece")
    fig = column_heatmap(amap)
    fig.update_layout(title=dict(text=escape(title)))
    return fig


def merged_labels(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """One label per position of two equally long token lists: the token, or ``a / b`` where they differ."""
    return [a if a == b else f"{a} / {b}" for a, b in zip(first, second)]


def difference_figure(first: AttentionMap, second: AttentionMap, title: str) -> go.Figure:
    """``first - second`` of two maps of the same shape, on a diverging scale (red: more weight in the first)."""
    if first.weights.shape != second.weights.shape:
        raise ValueError(f"maps of shapes {first.weights.shape} and {second.weights.shape} cannot be subtracted: "
                         "the difference needs the same number of tokens on both axes")
    diff = first.weights - second.weights
    amap = AttentionMap(diff, merged_labels(first.query_labels, second.query_labels),
                        merged_labels(first.key_labels, second.key_labels), [""] * diff.shape[0], first.kind,
                        first.layer, first.head, first.level)
    bound = float(max(np.abs(diff).max(), 1e-6))
    fig = map_heatmap(amap)
    fig.update_traces(colorscale="RdBu_r", zmin=-bound, zmax=bound, zmid=0.0,
                      colorbar=dict(title=dict(text="difference")),
                      hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>difference %{z:+.6f}"
                                    "<extra></extra>")
    fig.update_layout(title=dict(text=escape(title)))
    return fig


# --- word alignment ----------------------------------------------------------------------------------------------
def _spread(count: int) -> np.ndarray:
    """`count` x positions spread over [0, 1]."""
    return np.linspace(0.0, 1.0, count) if count > 1 else np.array([0.5])


def alignment_figure(weights: np.ndarray, source_words: Sequence[str], target_words: Sequence[str],
                     links: Collection[Link], title: str, gold: Collection[Link] = ()) -> go.Figure:
    """Source words on top, target words below, a line per link ``(source word, target word)`` as thick and opaque
    as its weight in the ``(target_words, source_words)`` map; `gold` links dashed green."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(target_words), len(source_words)):
        raise ValueError(f"a word map of shape {w.shape} does not fit {len(target_words)} target x "
                         f"{len(source_words)} source words")
    xs, xt = _spread(len(source_words)), _spread(len(target_words))
    fig = go.Figure()
    for i, j in sorted(gold):
        if i < len(source_words) and j < len(target_words):
            fig.add_trace(go.Scatter(x=[xs[i], xt[j]], y=[1, 0], mode="lines", hoverinfo="skip", showlegend=False,
                                     line=dict(color=GOLD_COLOR, width=2, dash="dash"), name="gold"))
    for i, j in sorted(links):
        weight = float(w[j, i])
        fig.add_trace(go.Scatter(x=[xs[i], xt[j]], y=[1, 0], mode="lines", showlegend=False, name="link",
                                 line=dict(color=SELECTED_COLOR, width=1 + 6 * weight), opacity=0.3 + 0.7 * weight,
                                 hovertext=escape(f"{source_words[i]} ({i}) – {target_words[j]} ({j}): {weight:.4f}"),
                                 hovertemplate="%{hovertext}<extra></extra>"))
    source_hover = [_links(f"{escape(word)} ({i}) is attended by", w[:, i], target_words)
                    for i, word in enumerate(source_words)]
    target_hover = [_links(f"{escape(word)} ({j}) attends to", w[j], source_words)
                    for j, word in enumerate(target_words)]
    for x, y, words, hover, position, side in ((xs, 1, source_words, source_hover, "top center", "source"),
                                               (xt, 0, target_words, target_hover, "bottom center", "target")):
        fig.add_trace(go.Scatter(x=x, y=[y] * len(words), mode="markers+text", text=[escape(t) for t in words],
                                 textposition=position, marker=dict(size=9, color="#8c8c8c"), hovertext=hover,
                                 hovertemplate="%{hovertext}<extra></extra>", name=f"{side} words",
                                 showlegend=False))
    fig.update_layout(title=dict(text=escape(title)), height=320, margin=MARGIN, hovermode="closest",
                      dragmode=False, plot_bgcolor="rgba(0,0,0,0)",
                      xaxis=dict(visible=False, range=[-0.08, 1.08]),
                      yaxis=dict(range=[-0.45, 1.45], tickmode="array", tickvals=[0, 1],
                                 ticktext=["target words", "source words"], showgrid=False, zeroline=False))
    return fig


def word_map_figure(weights: np.ndarray, source_words: Sequence[str], target_words: Sequence[str], layer: int,
                    head: int | str, links: Collection[Link], gold: Collection[Link] = (),
                    rows: str = "output") -> go.Figure:
    """The word-level cross-attention map (the explorer's heatmap) with the links ringed and gold links crossed;
    `rows` says whether a target word's row is the query that predicted it ("output") or read it ("input")."""
    if rows not in ROW_LABELS:
        raise ValueError(f"rows must be one of {', '.join(ROW_LABELS)}; got {rows!r}")
    amap = AttentionMap(np.asarray(weights, dtype=np.float32), list(target_words), list(source_words),
                        [""] * len(target_words), "cross", layer, head, "word",
                        PREDICTED_ROWS.replace("output token", "output word") if rows == "output" else "")
    fig = map_heatmap(amap)
    for marks, name, symbol, color in ((links, "alignment link", "circle-open", SELECTED_COLOR),
                                       (gold, "gold link", "x-thin-open", GOLD_COLOR)):
        if marks:
            fig.add_trace(go.Scatter(x=[i for i, _ in sorted(marks)], y=[j for _, j in sorted(marks)],
                                     mode="markers", name=name, hoverinfo="skip",
                                     marker=dict(symbol=symbol, size=16, color=color, line=dict(width=3,
                                                                                              color=color))))
    fig.update_layout(legend=dict(orientation="h", y=-0.02, yanchor="top"))
    return fig


def aer_grid(table: pd.DataFrame, layers: int, heads: int, title: str) -> go.Figure:
    """AER of each cross-attention head (the rows of `alignment.attention_aer` with a head), lower is better."""
    per_head = table[table["head"].notna()].assign(kind="cross")
    per_head = per_head.astype({"head": int})
    values = table_grid(per_head, "aer", {"cross": layers}, heads)
    return head_grid(values, title, "AER", "Viridis_r")
