"""Explore's attention views, for every kind of model (`KindParts`: what a kind draws its own way): the controls,
then the head heatmap, the model view, the head view or the token focus."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st

from app import long_views, sessions, state, token_picker, widgets
from app.page_settings import EXPLORE as own
from app.shared_settings import LEVEL_LABELS, SHARED, VIEWS
from viz_model.nn import kinds
from viz_model.plot import head_groups, long_map_figures, map_figures
from viz_model.trace import AttentionTrace

LONG_DRAWINGS = {"blocks": "the whole map, in blocks", "window": "a window, every weight"}
HEAD_VIEW_TOKENS = 48  # the positions a long prompt's head view draws, around the picked token
FOCUS_COLUMN_ROWS = 512  # the queries a long prompt's token focus reads its column over, from the token on


@dataclass(frozen=True)
class KindParts:
    """What the views draw their own way for one kind of model: the attention kinds offered (the first is the
    fallback; `say_kind_change`: a kind that does not exist here is said), the head pickers' labels, whether the
    heatmap offers value-weighted maps and contributions, the marks on a self-attention map and on the model view,
    the notes below them, the key/value head groups of the head view and the queries and keys it draws (a window
    of a long prompt's; one sentence of a pair to the other)."""

    attention_kinds: list[str]
    say_kind_change: bool
    head_label: Callable[[AttentionTrace], Callable[[int | str], str]]
    short_head_label: Callable[[AttentionTrace], Callable[[int], str]]
    value_measures: bool
    mark_map: Callable[[go.Figure, AttentionTrace, int], None]
    heatmap_note: Callable[[AttentionTrace, int, str], None]
    mark_model_view: Callable[[go.Figure, AttentionTrace, str, str | None], None]
    model_view_note: Callable[[AttentionTrace], str]
    groups: Callable[[AttentionTrace], list[int] | None]
    head_view_note: Callable[[AttentionTrace, int], None]
    head_windows: Callable[[AttentionTrace, slice | None], tuple[slice | None, slice | None]] = (
        lambda trace, window: (window, None))  # the head view's queries and keys (an encoder's pair: A and B)


def head_label(trace: AttentionTrace) -> Callable[[int | str], str]:
    """The head pickers' plain labels: "Head 2 of 8", "Mean over heads"."""
    return lambda value: state.head_label(value, trace.num_heads)


def short_head_label(trace: AttentionTrace) -> Callable[[int], str]:
    """The head view's plain labels of its 0-based heads: "Head 2"."""
    return lambda head: f"Head {head + 1}"


def page(session: sessions.Session, form: Callable[[], None], read: Callable[[], AttentionTrace | None],
         panel: Callable[[AttentionTrace], None], parts: Callable[[AttentionTrace], KindParts]) -> None:
    """The explorer below its title: the `form` beside what it gave (`read`'s trace, drawn by `panel`), then the
    attention views as `parts` says; the page stops where there is no trace (the reason is already shown)."""
    form_column, result_column = st.columns([3, 2], gap="large")
    with form_column:
        form()
    with result_column:
        trace = read()
        if trace is not None:
            panel(trace)
    if trace is None:
        st.stop()
    draw(session, trace, parts(trace))


def link_and_downloads(trace: AttentionTrace) -> None:
    """The link to this view and the trace's downloads, side by side."""
    with st.container(horizontal=True):
        state.link_popover()
        widgets.trace_downloads(trace)


def draw(session: sessions.Session, trace: AttentionTrace, parts: KindParts) -> None:
    """The controls and the view picked, of `trace` (drawn as `parts` says for its kind of model)."""
    # --- controls ----------------------------------------------------------------------------------------------------
    state.bound(st.segmented_control, "View", SHARED.view, list(VIEWS), format_func=VIEWS.get, required=True)
    view = SHARED.view.get() or "heatmap"
    notices = []
    columns = st.columns(4)
    kind_options = parts.attention_kinds
    with columns[0]:
        kind_notice = state.clamp_choice(SHARED.kind, kind_options, kind_options[0], "Attention kind")
        notices.append(kind_notice if parts.say_kind_change else None)
        state.bound(st.selectbox, "Attention", SHARED.kind, kind_options, format_func=kinds.KIND_LABELS.get)
    kind = SHARED.kind.get()
    layer_count = trace.num_layers[kind]
    head_count = trace.num_heads
    layer_options = list(range(1, layer_count + 1))
    long = long_map_figures.is_long(trace, kind)  # maps too long to draw cell by cell: blocks, windows, summaries
    head_options = state.head_options(head_count)
    if long and view == "heatmap":  # one head's map is read alone; mean and max would make every map
        head_options = [h for h in head_options if isinstance(h, int)]
    current_layer = SHARED.layer.get()
    notices.append(state.clamp_choice(SHARED.layer, layer_options, min(current_layer, layer_count)
                                      if isinstance(current_layer, int) else 1, "Layer"))
    notices.append(state.clamp_choice(SHARED.head, head_options, 1, "Head"))
    if view in ("heatmap", "head"):
        with columns[1]:
            state.bound(st.selectbox, "Layer", SHARED.layer, layer_options,
                        format_func=lambda v: f"Layer {v} of {layer_count}")
    if view in ("heatmap", "focus"):
        with columns[2]:
            state.bound(st.selectbox, "Head", SHARED.head, head_options,
                        format_func=parts.head_label(trace))
    if view == "heatmap" and long:
        SHARED.level.set("piece")
        with columns[3]:
            own.long_draw.init()
            state.bound(st.radio, "Draw", own.long_draw, list(LONG_DRAWINGS), format_func=LONG_DRAWINGS.get,
                        help=f"A map of {len(trace.axes(kind)[0])} tokens has too many cells to draw one by one: "
                             "blocks show all of it, a window shows every weight of a part of it.")
    elif view == "heatmap":
        with columns[3]:
            state.clamp_choice(SHARED.level, list(LEVEL_LABELS), "piece", "Granularity")
            state.bound(st.selectbox, "Granularity", SHARED.level, list(LEVEL_LABELS), format_func=LEVEL_LABELS.get)
    if view == "heatmap" and kind != "encoder" and not long:
        own.rows.init()
        state.bound(st.radio, "Label decoder rows by", own.rows, list(map_figures.ROW_LABELS), horizontal=True,
                    format_func={"input": "the token each row reads (decoder input)",
                                 "output": "the token each row predicts"}.get,
                    help="Row t of a decoder or cross-attention map reads token t and predicts token t + 1.")
    if view == "heatmap" and not parts.value_measures:
        own.measure.set("weights")  # value-weighted maps and contributions: translation models for now
    elif view == "heatmap":
        own.measure.init()
        state.bound(st.radio, "Show", own.measure, list(map_figures.MEASURES), horizontal=True,
                    format_func={"weights": "attention weights", "value_weighted": "value-weighted",
                                 "contributions": "contributions (ALTI)"}.get,
                    help="Value-weighted: each weight times the length of the vector its key passes on (‖α f(x)‖). "
                    "Contributions: how much each token adds to the layer's output, all heads, the residual and "
                    "the LayerNorm included (one map per layer). See Analyze → Attribution.")
    for message in filter(None, notices):
        st.info(message)

    layer = int(SHARED.layer.get()) - 1
    chosen_head = SHARED.head.get()
    head = state.head_index(chosen_head)
    name = f"{kind}-layer{layer + 1}-{'head' + str(chosen_head) if isinstance(chosen_head, int) else chosen_head}"


    # --- views -------------------------------------------------------------------------------------------------------
    def picked_position() -> int:
        """A long prompt's token, picked by search or on the strip (the window and the token focus open at it)."""
        return token_picker.token_picker(trace.axes(kind)[0], own.token)


    def open_from_model_view() -> None:
        point = state.selected_point(own.model_view.get())
        if point is None:
            return
        picked_layer, picked_head = point
        SHARED.layer.set(int(picked_layer) + 1)
        SHARED.head.set(state.state_head(int(picked_head) if isinstance(picked_head, (int, float))
                                         else str(picked_head)))
        SHARED.view.set("heatmap")


    def focus_from_head_view() -> None:
        point = state.selected_point(own.head_view.get())
        own.focus.set(None if point is None else (str(point[0]), int(point[1])))


    if view == "heatmap" and long:
        n = len(trace.axes(kind)[0])
        if own.long_draw.get() == "window":
            position = picked_position()
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
        st.caption(note + " Rows are queries, columns are keys; each row sums to 1.")
        widgets.exports(fig, name, "heatmap")

    elif view == "heatmap":
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
        st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); each row sums to "
                   "1. Decoder rows are the decoder's inputs: row t reads token t and predicts the next one "
                   "(shown on hover).")
        widgets.exports(fig, name, "heatmap", csv=lambda: map_figures.map_dataframe(amap))

    elif view == "model":
        aggregate_options = ["heads", "mean", "max"]
        state.clamp_choice(own.aggregate, aggregate_options, "heads", "Aggregate")
        state.bound(st.radio, "Show", own.aggregate, aggregate_options, horizontal=True,
                    format_func={"heads": "Every head", "mean": "Mean over heads, per layer",
                                 "max": "Max over heads, per layer"}.get)
        aggregate = None if own.aggregate.get() == "heads" else own.aggregate.get()
        if long:
            with st.spinner("Summarising every head…"):
                fig = long_views.cached_figure(trace, ("model", kind, aggregate), lambda: (
                    long_map_figures.summary_model_view(trace, kind, aggregate)))
            long_map_figures.select_map(fig, trace, kind, aggregate, (layer, head))
        else:
            fig = map_figures.model_view(trace, kind, aggregate, selected=(layer, head))
        if not long:
            parts.mark_model_view(fig, trace, kind, aggregate)
        widgets.chart(fig, f"{kind}-model-view", key=own.model_view.key, on_select=open_from_model_view)
        if long:
            st.caption(f"A {len(trace.axes(kind)[0])}-token prompt: each map is drawn from a summary, the mean weight "
                       f"of each block of query rows and keys, read over {long_map_figures.SUMMARY_ROWS} evenly spaced "
                       "rows of the block (the title says how far apart); the head heatmap draws one map whole.")
        st.caption("Click a map to open it in the head heatmap." + ("" if long else parts.model_view_note(trace)))
        widgets.exports(fig, f"{kind}-model-view", "model")

    elif view == "head":
        heads = list(range(head_count))
        own.drawn_heads.set([h for h in own.drawn_heads.get([head if isinstance(head, int) else 0]) if h in heads])
        pick, threshold = st.columns([3, 1])
        with pick:
            state.bound(st.multiselect, "Heads to draw", own.drawn_heads, heads,
                        format_func=parts.short_head_label(trace))
        with threshold:
            own.min_weight.init()
            state.bound(st.slider, "Hide lines below weight", own.min_weight, 0.0, 0.5, step=0.01)
        chosen = own.drawn_heads.get()
        if not chosen:
            st.info("Pick at least one head to draw.")
            st.stop()
        queries, keys = trace.axes(kind)
        focus = own.focus.get()
        if focus is not None and not (focus[0] in ("query", "key")
                                      and 0 <= focus[1] < len(queries if focus[0] == "query" else keys)):
            focus = None
            own.focus.set(None)
        groups = parts.groups(trace)
        window = None
        if long:
            position = picked_position()
            first = max(0, min(position - HEAD_VIEW_TOKENS // 2, len(queries) - HEAD_VIEW_TOKENS))
            window = slice(first, first + HEAD_VIEW_TOKENS)
            st.caption(f"A {len(queries)}-token prompt: the lines among positions {first} to "
                       f"{first + HEAD_VIEW_TOKENS - 1} around token {position} (pick another token to move them); "
                       "lines to keys outside them are left out.")
        window, key_window = parts.head_windows(trace, window)
        fig = map_figures.head_view(trace, kind, layer, chosen, focus=focus, min_weight=float(own.min_weight.get()),
                                      colors=None if groups is None else head_groups.group_colors(groups),
                                      names=None if groups is None else head_groups.group_names(groups),
                                      window=window, key_window=key_window)
        widgets.chart(fig, f"{kind}-layer{layer + 1}-head-view", key=own.head_view.key,
                      on_select=focus_from_head_view)
        if focus is not None:
            st.button("Show every token's lines", icon=":material/filter_alt_off:", on_click=own.focus.set,
                      args=(None,))
        st.caption("Left: queries, right: keys. Line opacity = attention weight; each head has its colour. Hover a "
                   "token to list its strongest links; click it to keep only its lines (click it again to undo)."
                   + (" Heads that share a key/value head are drawn in shades of one colour." if groups else ""))
        parts.head_view_note(trace, layer)
        widgets.exports(fig, f"{kind}-layer{layer + 1}-head-view", "head")

    else:  # token focus
        queries, keys = trace.axes(kind)
        if kind == "cross":
            options = [f"q{i}" for i in range(len(queries))] + [f"k{j}" for j in range(len(keys))]

            def describe(option: str) -> str:
                index = int(option[1:])
                return (f"target {index}: {queries[index]}" if option[0] == "q" else f"source {index}: {keys[index]}")
        else:
            options = [f"q{i}" for i in range(len(queries))]

            def describe(option: str) -> str:
                return f"{int(option[1:])}: {queries[int(option[1:])]}"
        if long and kind != "cross":
            picked_position()
        else:
            state.clamp_choice(own.token, options, options[min(1, len(options) - 1)], "Token")
            state.bound(st.selectbox, "Token", own.token, options, format_func=describe)
        choice = own.token.get()
        side = "query" if choice[0] == "q" else "key"
        if long:  # made once per trace, token and head: a rerun draws it again without remaking a map
            fig = long_views.cached_figure(trace, ("focus", kind, side, int(choice[1:]), head), lambda: (
                map_figures.token_focus(trace, kind, side, int(choice[1:]), head, column_rows=FOCUS_COLUMN_ROWS)))
        else:
            fig = map_figures.token_focus(trace, kind, side, int(choice[1:]), head)
        if long:
            st.caption(f"A {len(queries)}-token prompt: the right panel reads the {FOCUS_COLUMN_ROWS} queries from the "
                       "token on (the tokens after it, the only ones that can attend to it).")
        widgets.chart(fig, f"{kind}-token-focus", key="focus_chart")
        st.caption("Each row is a layer. Left: the token's own row of the map (where it attends); right: its column "
                   "(which tokens attend to it).")
        widgets.exports(fig, f"{kind}-token-focus", "focus")
