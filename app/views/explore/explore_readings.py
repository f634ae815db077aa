"""Explore's views where they differ by how a trace's maps are read (`AttentionTrace.reading`): whole, drawn cell by
cell, or by rows (a long prompt's), drawn as blocks, windows and summaries made once per trace (`long_views`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app import long_views, sessions, state, token_picker, widgets
from app.page_settings import EXPLORE as own
from app.shared_settings import LEVEL_LABELS, SHARED
from app.views.explore.explore_parts import KindParts
from viz_model.plot import long_map_figures, map_figures
from viz_model.trace import AttentionTrace

DRAWINGS = {"blocks": "the whole map, in blocks", "window": "a window, every weight"}  # a long map's heatmap
HEAD_VIEW_TOKENS = 48  # the positions a long prompt's head view draws, around the picked token
FOCUS_COLUMN_ROWS = 512  # the queries a long prompt's token focus reads its column over, from the token on


def row_sums(trace: AttentionTrace) -> str:
    """What a map's rows sum to: 1, or less where the heads have learned sinks (gpt-oss)."""
    if trace.sink_logits() is None:
        return "each row sums to 1."
    return ("each row sums to 1 minus the share its head's learned sink took (the rest went to no token: see "
            "Attention sinks).")


def picked_position(trace: AttentionTrace, kind: str) -> int:
    """A long prompt's token, picked by search or on the strip (the window and the token focus open at it)."""
    return token_picker.token_picker(trace.axes(kind)[0], own.token)


# --- maps read whole ---------------------------------------------------------------------------------------------
def every_head(options: list, view: str) -> list:
    """The head picker's options as they are: every head, and the mean and max over heads."""
    return options


def whole_controls(trace: AttentionTrace, kind: str, column: Any) -> None:
    """The heatmap's granularity (in `column`) and, for decoder and cross maps, what labels their rows."""
    with column:
        state.clamp_choice(SHARED.level, list(LEVEL_LABELS), "piece", "Granularity")
        state.bound(st.selectbox, "Granularity", SHARED.level, list(LEVEL_LABELS), format_func=LEVEL_LABELS.get)
    if kind != "encoder":
        own.rows.init()
        state.bound(st.radio, "Label decoder rows by", own.rows, list(map_figures.ROW_LABELS), horizontal=True,
                    format_func={"input": "the token each row reads (decoder input)",
                                 "output": "the token each row predicts"}.get,
                    help="Row t of a decoder or cross-attention map reads token t and predicts token t + 1.")


def whole_heatmap(session: sessions.Session, trace: AttentionTrace, parts: KindParts, kind: str, layer: int,
                  head: int | str, name: str) -> None:
    """One head's map (or the heads' mean or max), every cell, at the granularity and in the measure picked."""
    level = SHARED.level.get()
    measure = own.measure.get()
    attribution = None
    if measure != "weights":
        with st.spinner("Computing the contributions…"):
            attribution = session.attribution(trace, ("value_weighted", "alti"))
        if measure == "contributions":
            st.caption("Contributions are per layer: the head choice does not apply." + (
                " Cross-attention's last column is the decoder's own residual stream." if kind == "cross" else ""))
    amap = map_figures.attention_map(trace, kind, layer, head, level, own.rows.get(), measure, attribution)
    name = name if measure == "weights" else f"{name}-{measure}"
    fig = map_figures.map_heatmap(amap)
    if level == "piece":
        parts.mark_map(fig, trace, layer)
    widgets.chart(fig, name, key="heatmap_chart")
    parts.heatmap_note(trace, layer, level)
    st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); " + row_sums(trace)
               + " Decoder rows are the decoder's inputs: row t reads token t and predicts the next one "
               "(shown on hover).")
    widgets.exports(fig, name, "heatmap", csv=lambda: map_figures.map_dataframe(amap))


def whole_model_view(trace: AttentionTrace, parts: KindParts, kind: str, aggregate: str | None,
                     selected: tuple[int, int | str]) -> go.Figure:
    """Every map drawn whole, the `selected` one framed, with the kind's marks."""
    fig = map_figures.model_view(trace, kind, aggregate, selected=selected)
    parts.mark_model_view(fig, trace, kind, aggregate)
    return fig


def whole_model_notes(trace: AttentionTrace, parts: KindParts, kind: str) -> None:
    st.caption("Click a map to open it in the head heatmap." + parts.model_view_note(trace))


def every_position(trace: AttentionTrace, kind: str) -> slice | None:
    """The head view's positions: all of them (None)."""
    return None


def focus_select(trace: AttentionTrace, kind: str, options: list[str], describe: Callable[[str], str]) -> None:
    """The token focus's token, picked in a list of every token."""
    state.clamp_choice(own.token, options, options[min(1, len(options) - 1)], "Token")
    state.bound(st.selectbox, "Token", own.token, options, format_func=describe)


def whole_focus(trace: AttentionTrace, kind: str, side: str, index: int, head: int | str) -> go.Figure:
    """The token's row and column in every layer, over every token."""
    return map_figures.token_focus(trace, kind, side, index, head)


# --- maps read by rows -------------------------------------------------------------------------------------------
def single_heads(options: list, view: str) -> list:
    """The head picker's options: on the heatmap single heads alone (one head's map is read alone; the mean and max
    would make every map)."""
    return [h for h in options if isinstance(h, int)] if view == "heatmap" else options


def drawing_controls(trace: AttentionTrace, kind: str, column: Any) -> None:
    """How the map is drawn (in `column`): blocks or a window; its granularity is the piece."""
    SHARED.level.set("piece")
    with column:
        own.drawing.init()
        state.bound(st.radio, "Draw", own.drawing, list(DRAWINGS), format_func=DRAWINGS.get,
                    help=f"A map of {len(trace.axes(kind)[0])} tokens has too many cells to draw one by one: "
                         "blocks show all of it, a window shows every weight of a part of it.")


def blocks_heatmap(session: sessions.Session, trace: AttentionTrace, parts: KindParts, kind: str, layer: int,
                   head: int | str, name: str) -> None:
    """One head's map as blocks, or a window of every weight around a token picked by search or on the strip."""
    n = len(trace.axes(kind)[0])
    if own.drawing.get() == "window":
        position = picked_position(trace, kind)
        first = max(0, min(position - long_map_figures.WINDOW_TOKENS // 2, n - long_map_figures.WINDOW_TOKENS))
        fig = long_views.cached_figure(trace, ("window", kind, layer, head, first), lambda: (
            long_map_figures.map_window(trace, kind, layer, head, first, first)))
        note = (f"Every weight of queries and keys {first} to {first + long_map_figures.WINDOW_TOKENS - 1} around "
                f"token {position}, exact (hover a cell); pick another token to move the window.")
    else:
        fig = long_views.cached_figure(trace, ("blocks", kind, layer, head), lambda: (
            long_map_figures.downsampled_map(trace, kind, layer, head)))
        note = (f"Downsampled: the {n} x {n} map is drawn as blocks, each its strongest weight (hover for its mean "
                "too); zoom in by dragging, or draw a window to read every weight.")
    parts.mark_map(fig, trace, layer)
    widgets.chart(fig, name, key="heatmap_chart")
    st.caption(note + " Rows are queries, columns are keys; " + row_sums(trace))
    widgets.exports(fig, name, "heatmap")


def summary_model_view(trace: AttentionTrace, parts: KindParts, kind: str, aggregate: str | None,
                       selected: tuple[int, int | str]) -> go.Figure:
    """Every map drawn from its block means (`long_map_figures.summary_model_view`), the `selected` one framed."""
    with st.spinner("Summarising every head…"):
        fig = long_views.cached_figure(trace, ("model", kind, aggregate), lambda: (
            long_map_figures.summary_model_view(trace, kind, aggregate)))
    return long_map_figures.select_map(fig, trace, kind, aggregate, selected)


def summary_model_notes(trace: AttentionTrace, parts: KindParts, kind: str) -> None:
    st.caption(f"A {len(trace.axes(kind)[0])}-token prompt: each map is drawn from a summary, the mean weight "
               f"of each block of query rows and keys, read over {long_map_figures.SUMMARY_ROWS} evenly spaced "
               "rows of the block (the title says how far apart); the head heatmap draws one map whole.")
    st.caption("Click a map to open it in the head heatmap.")


def positions_around(trace: AttentionTrace, kind: str) -> slice:
    """The head view's `HEAD_VIEW_TOKENS` positions around a token picked by search or on the strip, said in a
    caption."""
    queries = trace.axes(kind)[0]
    position = picked_position(trace, kind)
    first = max(0, min(position - HEAD_VIEW_TOKENS // 2, len(queries) - HEAD_VIEW_TOKENS))
    st.caption(f"A {len(queries)}-token prompt: the lines among positions {first} to "
               f"{first + HEAD_VIEW_TOKENS - 1} around token {position} (pick another token to move them); "
               "lines to keys outside them are left out.")
    return slice(first, first + HEAD_VIEW_TOKENS)


def focus_search(trace: AttentionTrace, kind: str, options: list[str], describe: Callable[[str], str]) -> None:
    """The token focus's token, picked by search or on the strip (cross-attention's, a query or a key, in a list)."""
    if kind == "cross":
        focus_select(trace, kind, options, describe)
    else:
        picked_position(trace, kind)


def column_focus(trace: AttentionTrace, kind: str, side: str, index: int, head: int | str) -> go.Figure:
    """The token's row in every layer and its column over the `FOCUS_COLUMN_ROWS` queries from it on, made once per
    trace, token and head (a rerun draws it again without remaking a map), said in a caption."""
    fig = long_views.cached_figure(trace, ("focus", kind, side, index, head), lambda: (
        map_figures.token_focus(trace, kind, side, index, head, column_rows=FOCUS_COLUMN_ROWS)))
    st.caption(f"A {len(trace.axes(kind)[0])}-token prompt: the right panel reads the {FOCUS_COLUMN_ROWS} queries "
               "from the token on (the tokens after it, the only ones that can attend to it).")
    return fig


@dataclass(frozen=True)
class MapReading:
    """What Explore draws its own way for maps read whole or by rows: the head picker's options, the heatmap's own
    controls and the heatmap, the model view and its notes, the head view's positions, and the token focus's picker
    and figure."""

    head_options: Callable[[list, str], list]
    heatmap_controls: Callable[[AttentionTrace, str, Any], None]
    heatmap: Callable[..., None]
    model_view: Callable[..., go.Figure]
    model_notes: Callable[..., None]
    head_window: Callable[[AttentionTrace, str], slice | None]
    focus_token: Callable[[AttentionTrace, str, list[str], Callable[[str], str]], None]
    focus: Callable[[AttentionTrace, str, str, int, Any], go.Figure]


READINGS = {  # per `AttentionTrace.reading`
    "whole": MapReading(every_head, whole_controls, whole_heatmap, whole_model_view, whole_model_notes,
                        every_position, focus_select, whole_focus),
    "rows": MapReading(single_heads, drawing_controls, blocks_heatmap, summary_model_view, summary_model_notes,
                       positions_around, focus_search, column_focus)}
