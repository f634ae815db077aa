"""Explore's attention views, for every kind of model (`KindParts`: what a kind draws its own way): the controls,
then the head heatmap, the model view, the head view or the token focus."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app import sessions, state, widgets
from app.page_settings import EXPLORE as own
from app.shared_settings import SHARED, VIEWS
from app.views.explore.explore_parts import KindParts
from app.views.explore.explore_readings import READINGS
from viz_model.nn import kinds
from viz_model.plot import head_groups, map_figures
from viz_model.trace import AttentionTrace


def page(session: sessions.Session, form: Callable[[], None], read: Callable[[], AttentionTrace | None],
         panel: Callable[[AttentionTrace], None], parts: Callable[[AttentionTrace], KindParts]) -> AttentionTrace:
    """The explorer below its title: the `form` beside what it gave (`read`'s trace, drawn by `panel`), then the
    attention views as `parts` says; returns the trace drawn (the page stops where there is none: the reason is
    already shown)."""
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
    return trace


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
    reading = READINGS[trace.reading(kind)]  # by rows: maps too long to draw cell by cell (blocks, windows, summaries)
    head_options = reading.head_options(state.head_options(head_count), view)
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
    if view == "heatmap":
        reading.heatmap_controls(trace, kind, columns[3])
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


    if view == "heatmap":
        reading.heatmap(session, trace, parts, kind, layer, head, name)

    elif view == "model":
        aggregate_options = ["heads", "mean", "max"]
        state.clamp_choice(own.aggregate, aggregate_options, "heads", "Aggregate")
        state.bound(st.radio, "Show", own.aggregate, aggregate_options, horizontal=True,
                    format_func={"heads": "Every head", "mean": "Mean over heads, per layer",
                                 "max": "Max over heads, per layer"}.get)
        aggregate = None if own.aggregate.get() == "heads" else own.aggregate.get()
        fig = reading.model_view(trace, parts, kind, aggregate, (layer, head))
        widgets.chart(fig, f"{kind}-model-view", key=own.model_view.key, on_select=open_from_model_view)
        reading.model_notes(trace, parts, kind)
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
        window = reading.head_window(trace, kind)
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
        reading.focus_token(trace, kind, options, describe)
        choice = own.token.get()
        side = "query" if choice[0] == "q" else "key"
        fig = reading.focus(trace, kind, side, int(choice[1:]), head)
        widgets.chart(fig, f"{kind}-token-focus", key="focus_chart")
        st.caption("Each row is a layer. Left: the token's own row of the map (where it attends); right: its column "
                   "(which tokens attend to it).")
        widgets.exports(fig, f"{kind}-token-focus", "focus")
