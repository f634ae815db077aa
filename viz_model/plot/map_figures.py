"""Attention maps of a trace as figures: one map, every layer x head, the head view and a token's focus.

Layers and heads count from 0 in code and from 1 on screen; a head is an int, ``"mean"`` or ``"max"``; token axes
are numeric (tick labels carry the tokens), so repeated tokens never merge into one category.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.map_summary import row_blocks
from ..attribution import Attribution
from ..config.checks import check_int
from ..nn.kinds import ATTENTION_KINDS, KIND_TITLES, check_kind
from ..trace import AttentionTrace
from .figure_style import HEAD_COLORS, WEIGHT_SCALE, _font_px, _row_px, _tick_angle, _token_axis, escape

KINDS = ATTENTION_KINDS
AGGREGATES = ("mean", "max")
LEVELS = ("piece", "word")
MEASURES = {"weights": "attention weights", "value_weighted": "value-weighted ‖α f(x)‖",
            "contributions": "ALTI contributions (all heads, residual and LayerNorm included)"}
RESIDUAL_LABEL = "(residual)"  # the extra key of a cross-attention layer's contributions: the decoder's own stream
ROW_LABELS = ("input", "output")  # decoder rows labelled by the token they read, or by the token they predicted
PREDICTED_ROWS = "queries (rows): the output token each row predicted"
Head = int | str


def head_name(head: Head) -> str:
    if head == "mean":
        return "mean over heads"
    if head == "max":
        return "max over heads"
    return f"head {int(head) + 1}"


def axis_names(kind: str) -> tuple[str, str]:
    """(query axis title, key axis title) of a kind's maps."""
    if kind == "encoder":
        return "queries (rows): source tokens", "keys (columns): source tokens"
    if kind == "decoder":
        return "queries (rows): decoder inputs", "keys (columns): decoder inputs"
    return "queries (rows): decoder inputs (target)", "keys (columns): source tokens (encoder output)"




def check_layer(trace: AttentionTrace, kind: str, layer: int) -> None:
    count = trace.num_layers[kind]
    check_int("layer", layer, 0, count - 1, error=ValueError, kinds=(int, np.integer),
              message=f"the model has {count} {kind} layers; layer index {layer!r} is out of range")


def check_head(trace: AttentionTrace, head: Head) -> None:
    if isinstance(head, str):
        if head not in AGGREGATES:
            raise ValueError(f"head must be a head index, 'mean' or 'max'; got {head!r}")
        return
    check_int("head", head, 0, trace.num_heads - 1, error=ValueError, kinds=(int, np.integer),
              message=f"the model has {trace.num_heads} heads; head index {head!r} is out of range")


def reduce_heads(weights: np.ndarray, head: Head) -> np.ndarray:
    """One ``(q, k)`` map from a layer's ``(heads, q, k)`` weights: a head, or the mean / max over heads."""
    if head == "mean":
        return weights.mean(axis=0)
    if head == "max":
        return weights.max(axis=0)
    return weights[int(head)]


def word_groups(words: Sequence[int]) -> list[list[int]]:
    """Piece positions of each word, in order (from a trace's ``*_words``)."""
    groups: dict[int, list[int]] = {}
    for position, word in enumerate(words):
        groups.setdefault(int(word), []).append(position)
    return [groups[w] for w in sorted(groups)]


def merge_words(weights: np.ndarray, query_groups: list[list[int]], key_groups: list[list[int]]) -> np.ndarray:
    """Word-level map: attention *to* a word sums its pieces, attention *from* a word averages its pieces.

    Rows keep summing to 1 (Clark et al., 2019, "What does BERT look at?").
    """
    summed = np.stack([weights[:, g].sum(axis=1) for g in key_groups], axis=1)
    return np.stack([summed[g].mean(axis=0) for g in query_groups], axis=0)


def word_labels(tokens: Sequence[str], groups: list[list[int]]) -> list[str]:
    return ["".join(tokens[i] for i in g) for g in groups]


# --- one map -----------------------------------------------------------------------------------------------------
@dataclass
class AttentionMap:
    """One 2-D map with its labels, as drawn by `head_heatmap` and exported as CSV."""

    weights: np.ndarray  # (q, k)
    query_labels: list[str]  # raw text (not escaped)
    key_labels: list[str]
    query_notes: list[str]  # extra hover text per row (e.g. the token the decoder predicted there)
    kind: str
    layer: int
    head: Head
    level: str
    query_title: str = ""  # the row axis title when it is not the kind's own (see `axis_names`)
    measure: str = "weights"

    @property
    def title(self) -> str:
        level = ", words" if self.level == "word" else ""
        if self.measure == "contributions":
            return f"{KIND_TITLES[self.kind]}: layer {self.layer + 1}{level} · {MEASURES[self.measure]}"
        measure = "" if self.measure == "weights" else f" · {MEASURES[self.measure]}"
        return f"{KIND_TITLES[self.kind]}: layer {self.layer + 1}, {head_name(self.head)}{level}{measure}"

    @property
    def value_name(self) -> str:
        return {"weights": "weight", "value_weighted": "‖α f(x)‖", "contributions": "contribution"}[self.measure]


def attention_map(trace: AttentionTrace, kind: str, layer: int, head: Head, level: str = "piece",
                  rows: str = "input", measure: str = "weights", attribution: Attribution | None = None
                  ) -> AttentionMap:
    """One map of the trace; ``rows="output"`` labels decoder and cross rows by the token each row predicted
    (``output_tokens``) instead of the token it read (``target_tokens``, the decoder's inputs).

    `measure` "value_weighted" or "contributions" draws that measure of the same layer from `attribution` (an
    `viz_model.attribution.Attribution` of this trace's translation) instead of the weights; contributions are per
    layer (`head` is then ignored) and cross-attention's carry one more column, the decoder's residual stream."""
    check_kind(kind)
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}; got {measure!r}")
    if rows not in ROW_LABELS:
        raise ValueError(f"rows must be one of {', '.join(ROW_LABELS)}; got {rows!r}")
    check_layer(trace, kind, layer)
    check_head(trace, head)
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    weights = _measured(trace, kind, layer, head, measure, attribution)
    queries, keys = trace.axes(kind)
    if weights.shape[1] == len(keys) + 1:  # the residual column of cross-attention contributions
        keys = [*keys, RESIDUAL_LABEL]
    q_words = trace.source_words if kind == "encoder" else trace.target_words
    k_words = trace.target_words if kind == "decoder" else trace.source_words
    predicted = rows == "output" and kind != "encoder"
    if predicted:
        queries = trace.output_tokens
    notes = ([""] * len(queries) if kind == "encoder" else
             [f"reads {tok}" for tok in trace.target_tokens] if predicted else
             [f"predicts {tok}" for tok in trace.output_tokens])
    if level == "word":
        qg, kg = word_groups(q_words), word_groups(k_words)
        if len(keys) > len(k_words):
            kg = [*kg, [len(k_words)]]
        weights = merge_words(weights, qg, kg)
        queries, keys = word_labels(queries, qg), word_labels(keys, kg)
        other = trace.target_tokens if predicted else trace.output_tokens
        verb = "reads " if predicted else "predicts "
        notes = [""] * len(qg) if kind == "encoder" else [verb + "".join(other[i] for i in g) for g in qg]
    return AttentionMap(np.asarray(weights, dtype=np.float32), list(queries), list(keys), notes, kind, layer, head,
                        level, PREDICTED_ROWS if predicted else "", measure)


def _measured(trace: AttentionTrace, kind: str, layer: int, head: Head, measure: str,
              attribution: Attribution | None) -> np.ndarray:
    """The ``(q, k)`` map of `measure`: the trace's weights, or the attribution's value-weighted / ALTI map."""
    if measure == "weights":  # one head read alone (a long trace makes it, not its layer)
        return reduce_heads(trace.attentions(kind)[layer], head) if isinstance(head, str) else \
            trace.head_map(kind, layer, int(head))
    if attribution is None or attribution.source_ids != trace.source_ids or \
            attribution.output_ids != trace.output_ids:
        raise ValueError(f"the {MEASURES[measure]} need an attribution of this translation")
    maps = attribution.value_weighted if measure == "value_weighted" else attribution.alti_layers
    if kind not in maps:
        raise ValueError(f"the attribution was computed without {MEASURES[measure]}")
    chosen = maps[kind][layer]
    return reduce_heads(chosen, head) if measure == "value_weighted" else chosen


def map_dataframe(amap: AttentionMap) -> pd.DataFrame:
    """The map as a table: rows = queries, columns = keys, labelled ``position:token`` (unique)."""
    return pd.DataFrame(amap.weights, index=[f"{i}:{t}" for i, t in enumerate(amap.query_labels)],
                        columns=[f"{j}:{t}" for j, t in enumerate(amap.key_labels)])


def head_heatmap(trace: AttentionTrace, kind: str, layer: int, head: Head, level: str = "piece") -> go.Figure:
    """One attention map: real tokens on both axes (queries = rows, keys = columns), exact weight on hover."""
    return map_heatmap(attention_map(trace, kind, layer, head, level))


def map_heatmap(amap: AttentionMap) -> go.Figure:
    q, k = amap.weights.shape
    custom = np.empty((q, k, 2), dtype=object)
    for i, label in enumerate(amap.query_labels):
        note = f" · {escape(amap.query_notes[i])}" if amap.query_notes[i] else ""
        custom[i, :, 0] = f"{i}: {escape(label)}{note}"
    for j, label in enumerate(amap.key_labels):
        custom[:, j, 1] = f"{j}: {escape(label)}"
    q_title, k_title = axis_names(amap.kind)
    q_title = amap.query_title or q_title
    fig = go.Figure(go.Heatmap(
        z=amap.weights, x=list(range(k)), y=list(range(q)), customdata=custom, colorscale=WEIGHT_SCALE, zmin=0.0,
        zmax=float(max(amap.weights.max(), 1e-6)), colorbar=dict(title=dict(text=escape(amap.value_name))),
        hovertemplate=("query %{customdata[0]}<br>key %{customdata[1]}<br>" + escape(amap.value_name)
                       + " %{z:.6f}<extra></extra>"),
        xgap=1 if k <= 60 else 0, ygap=1 if q <= 60 else 0, name="attention"))
    fig.update_layout(
        title=dict(text=escape(amap.title)), height=max(380, 170 + _row_px(q) * q),
        xaxis=_token_axis(amap.key_labels, k_title), yaxis=_token_axis(amap.query_labels, q_title, reverse=True),
        margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)")
    fig.update_xaxes(tickangle=-45 if k > 12 else 0, side="bottom")
    return fig


# --- model view: every layer x head ------------------------------------------------------------------------------
def model_view(trace: AttentionTrace, kind: str, aggregate: str | None = None,
               selected: tuple[int, Head] | None = None) -> go.Figure:
    """All layers (rows) x heads (columns) of a kind as small maps in one figure.

    `aggregate` "mean"/"max" draws one map per layer instead (the heads reduced). Every map has an invisible
    marker at its centre carrying ``customdata = [layer, head]``; clicking anywhere on a map selects it
    (closest-centre hover over a regular grid = the map under the cursor).
    """
    check_kind(kind)
    queries, keys = trace.axes(kind)
    return tiled_model_view(trace.attentions(kind), queries, keys, kind, aggregate, selected)


def tiled_model_view(maps: Sequence[np.ndarray], queries: Sequence[str], keys: Sequence[str], kind: str,
                     aggregate: str | None = None, selected: tuple[int, Head] | None = None, note: str = "",
                     exact: bool = True) -> go.Figure:
    """`model_view` of per-layer ``(heads, rows, columns)`` maps labelled `queries` and `keys` (a long trace's
    block summaries: `exact` False leaves out the entropy, `note` says what the cells are)."""
    if aggregate is not None and aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be None, 'mean' or 'max'; got {aggregate!r}")
    layers = len(maps)
    if layers == 0:
        raise ValueError(f"the trace has no {kind} layers")
    heads: list[Head] = [aggregate] if aggregate else list(range(maps[0].shape[0]))
    q, k = maps[0].shape[1:]
    tile_h, tile_w = q + 1, k + 1  # one NaN row / column as the gap between maps
    z = np.full((layers * tile_h - 1, len(heads) * tile_w - 1), np.nan, dtype=np.float32)
    centres_x, centres_y, custom, hover = [], [], [], []
    for layer, weights in enumerate(maps):
        for column, head in enumerate(heads):
            m = reduce_heads(weights, head)
            z[layer * tile_h:layer * tile_h + q, column * tile_w:column * tile_w + k] = m
            centres_x.append(column * tile_w + (k - 1) / 2)
            centres_y.append(layer * tile_h + (q - 1) / 2)
            custom.append([layer, head if isinstance(head, str) else int(head)])
            i, j = np.unravel_index(int(np.argmax(m)), m.shape)
            hover.append(f"<b>layer {layer + 1}, {head_name(head)}</b><br>strongest: {escape(queries[i])} → "
                         f"{escape(keys[j])} ({m[i, j]:.4f})"
                         + (f"<br>mean entropy {_entropy(m):.3f} nats" if exact else "")
                         + "<br>click to open it in the head heatmap")
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=z, colorscale=WEIGHT_SCALE, zmin=0.0, zmax=float(np.nanmax(z)), hoverinfo="skip",
                             colorbar=dict(title=dict(text="weight")), name="maps"))
    fig.add_trace(go.Scatter(x=centres_x, y=centres_y, mode="markers", customdata=custom, hovertext=hover,
                             hovertemplate="%{hovertext}<extra></extra>", name="select",
                             marker=dict(size=max(8, min(q, k)), color="rgba(0,0,0,0)"), showlegend=False))
    mark_selected(fig, layers, heads, (q, k), selected)
    row_px = max(42, min(110, 900 // max(layers, 1)))
    fig.update_layout(
        title=dict(text=escape(f"{KIND_TITLES[kind]}: all {layers} layers × "
                               + (head_name(aggregate) if aggregate else f"{len(heads)} heads") + note)),
        height=120 + row_px * layers, hovermode="closest", hoverdistance=-1, dragmode=False, clickmode="event+select",
        margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(tickmode="array", tickvals=[c * tile_w + (k - 1) / 2 for c in range(len(heads))],
                   ticktext=[head_name(h).replace("head ", "H") for h in heads], side="top", showgrid=False,
                   zeroline=False, range=[-0.5, len(heads) * tile_w - 1.5]),
        yaxis=dict(tickmode="array", tickvals=[r * tile_h + (q - 1) / 2 for r in range(layers)],
                   ticktext=[f"L{r + 1}" for r in range(layers)], showgrid=False, zeroline=False,
                   range=[layers * tile_h - 1.5, -0.5], title=dict(text="layers")))
    return fig


def mark_selected(fig: go.Figure, layers: int, heads: Sequence[Head], tile: tuple[int, int],
                  selected: tuple[int, Head] | None) -> go.Figure:
    """A model view of `layers` x `heads` maps of `tile` (rows, columns) cells with the `selected` (layer, head)
    map framed (nothing where it is None or not drawn)."""
    if selected is not None:
        (sel_layer, sel_head), (q, k) = selected, tile
        if 0 <= sel_layer < layers and sel_head in heads:
            column = list(heads).index(sel_head)
            fig.add_shape(type="rect", x0=column * (k + 1) - 0.5, x1=column * (k + 1) + k - 0.5,
                          y0=sel_layer * (q + 1) - 0.5, y1=sel_layer * (q + 1) + q - 0.5,
                          line=dict(color="#e4572e", width=3))
    return fig


def _entropy(m: np.ndarray) -> float:
    p = np.clip(m, 1e-12, 1.0)
    return float(-(m * np.log(p)).sum(axis=-1).mean())


# --- head view: bipartite lines ----------------------------------------------------------------------------------
def head_view(trace: AttentionTrace, kind: str, layer: int, heads: Sequence[int],
              focus: tuple[str, int] | None = None, min_weight: float = 0.0, bins: int = 8,
              colors: Sequence[str] | None = None, names: Sequence[str] | None = None,
              window: slice | None = None, key_window: slice | None = None) -> go.Figure:
    """Lines from each query token (left) to each key token (right), one colour per head (`colors`, `names`: each
    head's colour and legend name in place of the defaults, as `head_groups` gives for grouped query heads);
    `window`: those positions alone as queries and keys (a long prompt's), each head's rows read alone;
    `key_window`: other positions as the keys (a sentence pair's B beside its A, as bertviz draws it).

    Line opacity is the weight relative to the strongest line drawn (binned into `bins` levels); lines below
    `min_weight` (absolute) are left out.

    `focus` = ("query", i) or ("key", j) keeps only that token's lines. Tokens are clickable markers with
    ``customdata = [side, index]``; hovering one lists its strongest links.
    """
    check_kind(kind)
    check_layer(trace, kind, layer)
    heads = [int(h) for h in heads]
    for h in heads:
        check_head(trace, h)
    if not heads:
        raise ValueError("pick at least one head to draw")
    if focus is not None and focus[0] not in ("query", "key"):
        raise ValueError(f"focus side must be 'query' or 'key'; got {focus[0]!r}")
    queries, keys = trace.axes(kind)
    keys_apart = key_window is not None
    key_window = key_window or window or slice(None)
    offset = 0 if window is None else range(len(queries))[window].start
    key_offset = range(len(keys))[key_window].start
    queries, keys = queries[window or slice(None)], keys[key_window]
    drawn = np.stack([trace.head_map(kind, layer, int(h), window)[:, key_window] for h in heads])
    nq, nk = len(queries), len(keys)
    if focus is not None:
        focus = (focus[0], focus[1] - (offset if focus[0] == "query" else key_offset))
        if not 0 <= focus[1] < (nq if focus[0] == "query" else nk):
            focus = None  # a token outside the window: every line of the window
    fig = go.Figure()
    edges = np.linspace(0.0, 1.0, bins + 1)
    strongest = float(max(drawn.max(), 1e-6))  # opacity is relative to the strongest line drawn
    for h, weights in zip(heads, drawn):
        w = weights / strongest
        color = HEAD_COLORS[h % len(HEAD_COLORS)] if colors is None else colors[h]
        name = f"head {h + 1}" if names is None else names[h]
        shown = False
        for b in range(bins):
            lo, hi = edges[b], edges[b + 1]
            sel = (w >= lo) & (weights >= min_weight) & ((w < hi) if b < bins - 1 else (w <= hi))
            if focus is not None:
                keep = np.zeros_like(sel)
                if focus[0] == "query" and 0 <= focus[1] < nq:
                    keep[focus[1], :] = True
                elif focus[0] == "key" and 0 <= focus[1] < nk:
                    keep[:, focus[1]] = True
                sel &= keep
            rows, cols = np.nonzero(sel)
            if len(rows) == 0:
                continue
            xs = np.tile([0.0, 1.0, np.nan], len(rows))
            ys = np.stack([rows, cols, np.full(len(rows), np.nan)], axis=1).ravel()
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", line=dict(color=color, width=2.5), opacity=float(max(0.08, hi)),
                hoverinfo="skip", name=name, legendgroup=f"head{h}", showlegend=not shown))
            shown = True
        if not shown:  # keep the legend entry even when no line passes the threshold
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=color, width=2.5),
                                     name=name, legendgroup=f"head{h}", hoverinfo="skip"))
    mean = drawn.mean(axis=0)
    q_hover = [_links(f"{escape(queries[i])} attends to", mean[i], keys, offset=key_offset) for i in range(nq)]
    k_hover = [_links(f"{escape(keys[j])} is attended by", mean[:, j], queries, offset=offset) for j in range(nk)]
    for side, labels, x, hover, position in (("query", queries, 0.0, q_hover, "middle left"),
                                             ("key", keys, 1.0, k_hover, "middle right")):
        focused = [focus is not None and focus[0] == side and focus[1] == i for i in range(len(labels))]
        fig.add_trace(go.Scatter(
            x=[x] * len(labels), y=list(range(len(labels))), mode="markers+text",
            text=[escape(t) for t in labels], textposition=position,
            textfont=dict(size=_font_px(max(nq, nk)), color=["#e4572e" if f else "#31333f" for f in focused]),
            marker=dict(size=[14 if f else 9 for f in focused], color=["#e4572e" if f else "#8c8c8c" for f in focused]),
            customdata=[[side, (offset if side == "query" else key_offset) + i] for i in range(len(labels))],
            hovertext=hover,
            hovertemplate="%{hovertext}<extra></extra>", name=f"{side} tokens", showlegend=False))
    q_title, k_title = axis_names(kind)
    n = max(nq, nk)
    heads_text = ", ".join(str(h + 1) for h in heads)
    focus_text = ""
    if focus is not None:
        label = queries[focus[1]] if focus[0] == "query" else keys[focus[1]]
        focus_text = f" · only the lines of {focus[0]} {(offset if focus[0] == 'query' else key_offset) + focus[1]}"
        focus_text += f": {label}"
    where = "" if window is None else f" · positions {offset} to {offset + nq - 1} of {len(trace.axes(kind)[0])}"
    if keys_apart:
        where = f" · queries {offset} to {offset + nq - 1}, keys {key_offset} to {key_offset + nk - 1}"
    fig.update_layout(
        title=dict(text=escape(f"{KIND_TITLES[kind]}: layer {layer + 1}, heads {heads_text}{focus_text}{where}")),
        height=max(360, 140 + _row_px(n) * n), hovermode="closest", clickmode="event+select", dragmode=False,
        margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)",
        legend=dict(orientation="h", y=-0.02, yanchor="top"),
        xaxis=dict(range=[-0.9, 1.9], showticklabels=True, tickmode="array", tickvals=[0, 1],
                   ticktext=[escape(q_title.split(":")[0]), escape(k_title.split(":")[0])], side="top",
                   showgrid=False, zeroline=False),
        yaxis=dict(range=[n - 0.5, -0.5], showticklabels=False, showgrid=False, zeroline=False))
    return fig


def _links(prefix: str, row: np.ndarray, labels: Sequence[str], top: int = 4, offset: int = 0) -> str:
    order = np.argsort(-row)[:top]
    return prefix + ":<br>" + "<br>".join(f"{escape(labels[i])} ({offset + i}): {row[i]:.4f}" for i in order)


# --- token focus -------------------------------------------------------------------------------------------------
MAX_TICK_LABELS = 256  # a token focus axis longer than this names positions, its tokens on hover


def token_lines(trace: AttentionTrace, kind: str, index: int, head: Head, what: str,
                rows: slice | None = None) -> np.ndarray:
    """``(layers, positions)``: token `index`'s row (`what` "row") or column ("column": of query `rows` alone, None
    all) of every layer's map of `head`, each head's rows read alone (`AttentionTrace.head_map`: no whole layer)."""
    heads, _, _ = trace.map_shape(kind, 0)
    chosen = list(range(heads)) if isinstance(head, str) else [int(head)]
    lines = []
    for layer in range(len(trace.attentions(kind))):
        if what == "row":
            per_head = [trace.head_map(kind, layer, h, slice(index, index + 1))[0] for h in chosen]
        else:
            per_head = [np.concatenate([block[:, index] for _, block in row_blocks(trace, kind, layer, h)])
                        if rows is None else trace.head_map(kind, layer, h, rows)[:, index] for h in chosen]
        lines.append(reduce_heads(np.stack(per_head), head if isinstance(head, str) else 0))
    return np.stack(lines)


def token_focus(trace: AttentionTrace, kind: str, side: str, index: int, head: Head = "mean",
                column_rows: int | None = None) -> go.Figure:
    """Where one token attends (its row) and what attends to it (its column), in every layer, as one figure.

    `side` is "query" or "key" for cross-attention (a target or a source token); for self-attention both
    panels are drawn for the token. `column_rows`: the column over that many queries from the token on alone
    (a long prompt's: its whole column would make every map).
    """
    check_kind(kind)
    check_head(trace, head)
    queries, keys = trace.axes(kind)
    if side not in ("query", "key"):
        raise ValueError(f"side must be 'query' or 'key'; got {side!r}")
    labels = queries if side == "query" else keys
    check_int("index", index, 0, len(labels) - 1, error=ValueError, kinds=(int, np.integer),
              message=f"token index {index!r} is out of range (0 to {len(labels) - 1})")
    layers = len(trace.attentions(kind))
    token = labels[index]
    panels = []
    if kind != "cross" or side == "query":
        panels.append(("row", token_lines(trace, kind, index, head, "row"), keys,
                       f"where {index}: {token} attends (keys)", 0))
    if kind != "cross" or side == "key":
        first = index if kind != "cross" else 0
        rows = None if column_rows is None else slice(first, min(len(queries), first + column_rows))
        shown = queries if rows is None else queries[rows]
        panels.append(("column", token_lines(trace, kind, index, head, "column", rows), shown,
                       f"what attends to {index}: {token} (queries"
                       + ("" if rows is None else f" {rows.start}–{rows.stop - 1}") + ")",
                       0 if rows is None else rows.start))
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[escape(p[3]) for p in panels],
                        horizontal_spacing=0.08)
    zmax = float(max(p[1].max() for p in panels))
    for c, (what, z, axis_labels, _, first) in enumerate(panels, start=1):
        positions = list(range(first, first + z.shape[1]))
        custom = np.empty(z.shape, dtype=object)
        for j, t in enumerate(axis_labels):
            custom[:, j] = f"{first + j}: {escape(t)}"
        other = "key" if what == "row" else "query"
        fig.add_trace(go.Heatmap(
            z=z, x=positions, y=list(range(1, layers + 1)), customdata=custom,
            colorscale=WEIGHT_SCALE, zmin=0.0, zmax=max(zmax, 1e-6), showscale=c == len(panels),
            colorbar=dict(title=dict(text="weight")),
            hovertemplate=f"layer %{{y}}<br>{other} %{{customdata}}<br>weight %{{z:.6f}}<extra></extra>",
            name=what), row=1, col=c)
        if len(axis_labels) <= MAX_TICK_LABELS:
            fig.update_xaxes(tickmode="array", tickvals=positions,
                             ticktext=[escape(t) for t in axis_labels], tickangle=_tick_angle(axis_labels, len(panels)),
                             tickfont=dict(size=_font_px(len(axis_labels))), showgrid=False, row=1, col=c)
        else:  # a long prompt: positions on the axis, the tokens on hover
            fig.update_xaxes(title=dict(text="position"), showgrid=False, row=1, col=c)
        fig.update_yaxes(tickmode="array", tickvals=list(range(1, layers + 1)),
                         ticktext=[f"layer {i + 1}" for i in range(layers)], autorange="reversed", showgrid=False,
                         row=1, col=c)
    fig.update_layout(title=dict(text=escape(f"{KIND_TITLES[kind]}, {head_name(head)}: token {index}: {token}")),
                      height=max(300, 160 + 46 * layers), margin=dict(l=10, r=10, t=80, b=10),
                      plot_bgcolor="rgba(0,0,0,0)")
    return fig
