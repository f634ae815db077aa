"""Translate & explore (home): the sentence, its translation, then the attention views."""

import streamlit as st

from app import sessions, state, widgets
from viz_model.nn import kinds
from viz_model.plot import attention as figures

ss = st.session_state
session = sessions.require_session()

st.title("Translate & explore")
st.caption("Type a sentence: see every attention head of every layer of the Transformer that translates it.")
state.show_url_problems()
widgets.domain_notice(session.model)
form_column, result_column = st.columns([3, 2], gap="large")
with form_column:
    widgets.sentence_form(session)
with result_column:
    trace = widgets.current_trace(session)
    if trace is not None:
        widgets.input_warnings(session, trace.source_text)
        widgets.translation_panel(trace)
        with st.container(horizontal=True):
            state.link_popover()
            widgets.trace_downloads(trace)
        widgets.steps_table(trace)
if trace is None:
    st.stop()

# --- controls ----------------------------------------------------------------------------------------------------
state.bound(st.segmented_control, "View", "view", list(state.VIEWS), format_func=state.VIEWS.get,
             required=True)
view = ss["view"] or "heatmap"
notices = []
columns = st.columns(4)
with columns[0]:
    message = state.clamp_choice("kind", list(kinds.KIND_LABELS), "encoder", "Attention kind")
    notices.append(message)
    state.bound(st.selectbox, "Attention", "kind", list(kinds.KIND_LABELS), format_func=kinds.KIND_LABELS.get)
kind = ss["kind"]
layer_count = trace.num_layers[kind]
head_count = trace.num_heads
layer_options = list(range(1, layer_count + 1))
head_options = state.head_options(head_count)
current_layer = ss.get("layer", 1)
notices.append(state.clamp_choice("layer", layer_options, min(current_layer, layer_count)
                                   if isinstance(current_layer, int) else 1, "Layer"))
notices.append(state.clamp_choice("head", head_options, 1, "Head"))
if view in ("heatmap", "head"):
    with columns[1]:
        state.bound(st.selectbox, "Layer", "layer", layer_options, format_func=lambda v: f"Layer {v} of {layer_count}")
if view in ("heatmap", "focus"):
    with columns[2]:
        state.bound(st.selectbox, "Head", "head", head_options,
                     format_func=lambda v: state.head_label(v, head_count))
if view == "heatmap":
    with columns[3]:
        state.clamp_choice("level", list(state.LEVEL_LABELS), "piece", "Granularity")
        state.bound(st.selectbox, "Granularity", "level", list(state.LEVEL_LABELS),
                     format_func=state.LEVEL_LABELS.get)
if view == "heatmap" and kind != "encoder":
    ss.setdefault("rows", "input")
    state.bound(st.radio, "Label decoder rows by", "rows", list(figures.ROW_LABELS), horizontal=True,
                 format_func={"input": "the token each row reads (decoder input)",
                              "output": "the token each row predicts"}.get,
                 help="Row t of a decoder or cross-attention map reads token t and predicts token t + 1.")
if view == "heatmap":
    ss.setdefault("measure", "weights")
    state.bound(st.radio, "Show", "measure", list(figures.MEASURES), horizontal=True,
                 format_func={"weights": "attention weights", "value_weighted": "value-weighted",
                              "contributions": "contributions (ALTI)"}.get,
                 help="Value-weighted: each weight times the length of the vector its key passes on (‖α f(x)‖). "
                      "Contributions: how much each token adds to the layer's output, all heads, the residual and "
                      "the LayerNorm included (one map per layer). See Analyze → Attribution.")
for message in filter(None, notices):
    st.info(message)

layer = int(ss["layer"]) - 1
head = state.head_index(ss["head"])
name = f"{kind}-layer{layer + 1}-{'head' + str(ss['head']) if isinstance(ss['head'], int) else ss['head']}"


# --- views -------------------------------------------------------------------------------------------------------
def open_from_model_view() -> None:
    point = state.selected_point(ss.get("mv_chart"))
    if point is None:
        return
    picked_layer, picked_head = point
    ss["layer"] = int(picked_layer) + 1
    ss["head"] = state.state_head(int(picked_head) if isinstance(picked_head, (int, float)) else str(picked_head))
    ss["view"] = "heatmap"


def focus_from_head_view() -> None:
    point = state.selected_point(ss.get("hv_chart"))
    ss["hv_focus"] = None if point is None else (str(point[0]), int(point[1]))


if view == "heatmap":
    level = ss.get("level", "piece")
    measure = ss.get("measure", "weights")
    attribution = None
    if measure != "weights":
        with st.spinner("Computing the contributions…"):
            attribution = session.attribution(trace, ("value_weighted", "alti"))
        if measure == "contributions":
            st.caption("Contributions are per layer: the head choice does not apply." + (
                " Cross-attention's last column is the decoder's own residual stream." if kind == "cross" else ""))
    amap = figures.attention_map(trace, kind, layer, head, level, ss.get("rows", "input"), measure, attribution)
    name = name if measure == "weights" else f"{name}-{measure}"
    fig = figures.map_heatmap(amap)
    widgets.chart(fig, name, key="heatmap_chart")
    st.caption("Rows are queries (the token that looks), columns are keys (the token looked at); each row sums to "
               "1. Decoder rows are the decoder's inputs: row t reads token t and predicts the next one "
               "(shown on hover).")
    widgets.exports(fig, name, "heatmap", csv=lambda: figures.map_dataframe(amap))

elif view == "model":
    aggregate_options = ["heads", "mean", "max"]
    state.clamp_choice("mv_aggregate", aggregate_options, "heads", "Aggregate")
    state.bound(st.radio, "Show", "mv_aggregate", aggregate_options, horizontal=True,
                 format_func={"heads": "Every head", "mean": "Mean over heads, per layer",
                          "max": "Max over heads, per layer"}.get)
    aggregate = None if ss["mv_aggregate"] == "heads" else ss["mv_aggregate"]
    fig = figures.model_view(trace, kind, aggregate, selected=(layer, head))
    widgets.chart(fig, f"{kind}-model-view", key="mv_chart", on_select=open_from_model_view)
    st.caption("Click a map to open it in the head heatmap.")
    widgets.exports(fig, f"{kind}-model-view", "model")

elif view == "head":
    heads = list(range(head_count))
    ss["hv_heads"] = [h for h in ss.get("hv_heads", [head if isinstance(head, int) else 0]) if h in heads]
    pick, threshold = st.columns([3, 1])
    with pick:
        state.bound(st.multiselect, "Heads to draw", "hv_heads", heads, format_func=lambda h: f"Head {h + 1}")
    with threshold:
        ss.setdefault("hv_min", 0.02)
        state.bound(st.slider, "Hide lines below weight", "hv_min", 0.0, 0.5, step=0.01)
    chosen = ss["hv_heads"]
    if not chosen:
        st.info("Pick at least one head to draw.")
        st.stop()
    queries, keys = trace.axes(kind)
    focus = ss.get("hv_focus")
    if focus is not None and not (focus[0] in ("query", "key")
                                  and 0 <= focus[1] < len(queries if focus[0] == "query" else keys)):
        focus = ss["hv_focus"] = None
    fig = figures.head_view(trace, kind, layer, chosen, focus=focus, min_weight=float(ss["hv_min"]))
    widgets.chart(fig, f"{kind}-layer{layer + 1}-head-view", key="hv_chart", on_select=focus_from_head_view)
    if focus is not None:
        st.button("Show every token's lines", icon=":material/filter_alt_off:", on_click=ss.__setitem__,
                  args=("hv_focus", None))
    st.caption("Left: queries, right: keys. Line opacity = attention weight; each head has its colour. Hover a "
               "token to list its strongest links; click it to keep only its lines (click it again to undo).")
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
    state.clamp_choice("focus_token", options, options[min(1, len(options) - 1)], "Token")
    state.bound(st.selectbox, "Token", "focus_token", options, format_func=describe)
    choice = ss["focus_token"]
    side = "query" if choice[0] == "q" else "key"
    fig = figures.token_focus(trace, kind, side, int(choice[1:]), head)
    widgets.chart(fig, f"{kind}-token-focus", key="focus_chart")
    st.caption("Each row is a layer. Left: the token's own row of the map (where it attends); right: its column "
               "(which tokens attend to it).")
    widgets.exports(fig, f"{kind}-token-focus", "focus")
