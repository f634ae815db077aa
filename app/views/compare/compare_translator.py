"""Compare: the same attention map for two sentences side by side (and their difference when the tokens line up),
and for two models on the same sentence (a language model beside a translator: `compare_lm`)."""

import streamlit as st

from app import analyze_pages, sessions, state, texts, tracing, widgets
from app.page_settings import COMPARE as own
from app.shared_settings import SHARED
from app.views.compare import compare_lm
from viz_model.data.typed_text import MAX_INPUT_CHARS, check_text
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.modeldir.languages import name as language_name
from viz_model.nn import kinds
from viz_model.plot import analysis_figures, map_figures
from viz_model.trace import AttentionTrace

View = tuple[str, int, map_figures.Head]  # kind, layer (0-based), head (0-based, "mean" or "max")

session = sessions.require_session()


def show_pair(first: AttentionTrace, second: AttentionTrace, view: View, names: tuple[str, str], key: str) -> None:
    """The `view` map of both traces side by side, then their difference when both have the same token axes."""
    maps = [map_figures.attention_map(t, *view) for t in (first, second)]
    for column, amap, trace_, name, n in zip(st.columns(2), maps, (first, second), names, (1, 2)):
        with column:
            widgets.show_text(name, f"{trace_.source_text} → {trace_.translation}")
            fig = analysis_figures.column_heatmap(amap)
            widgets.chart(fig, f"{key}-{n}", key=f"{key}_{n}_chart")
            widgets.exports(fig, f"{key}-{n}", f"{key}_{n}", csv=lambda amap=amap: map_figures.map_dataframe(amap))
    if maps[0].weights.shape != maps[1].weights.shape:
        st.info(f"No difference map: the maps have {maps[0].weights.shape[0]} × {maps[0].weights.shape[1]} and "
                f"{maps[1].weights.shape[0]} × {maps[1].weights.shape[1]} tokens. A difference subtracts weight from "
                "weight cell by cell, so it needs the same number of query and key tokens on both sides; compare "
                "them side by side above (or change a word for one of the same length).")
        return
    fig = analysis_figures.difference_figure(maps[0], maps[1], f"{names[0]} − {names[1]}: {maps[0].title}")
    widgets.chart(fig, f"{key}-difference", key=f"{key}_diff_chart")
    st.caption(f"Red: more weight in {names[0]}; blue: more in {names[1]}. Where the tokens differ the label shows "
               "both (first / second).")
    widgets.exports(fig, f"{key}-difference", f"{key}_diff")


st.title("Compare")
st.caption("The same head on two sentences, or on two models: what moves when one word changes?")
trace = tracing.trace_or_stop(session)

columns = st.columns(3)
with columns[0]:
    state.clamp_choice(own.kind, list(kinds.KIND_LABELS), SHARED.kind.get(), "Attention kind")
    state.bound(st.selectbox, "Attention", own.kind, list(kinds.KIND_LABELS), format_func=kinds.KIND_LABELS.get)
kind = own.kind.get()
layer_count, head_count = trace.num_layers[kind], trace.num_heads
layer_options = list(range(1, layer_count + 1))
head_options = state.head_options(head_count)
with columns[1]:
    state.clamp_choice(own.layer, layer_options, 1, "Layer")
    state.bound(st.selectbox, "Layer", own.layer, layer_options, format_func=lambda v: f"Layer {v} of {layer_count}")
with columns[2]:
    state.clamp_choice(own.head, head_options, "mean", "Head")
    state.bound(st.selectbox, "Head", own.head, head_options,
                 format_func=lambda v: state.head_label(v, head_count))
layer = int(own.layer.get()) - 1
head = state.head_index(own.head.get())

# --- two sentences -----------------------------------------------------------------------------------------------
st.subheader("Two sentences, one model")
if own.other_for.get() != trace.source_text:  # a new first sentence: a new default second one
    own.other.set(analyze_pages.one_word_changed(trace.source_text))
    own.other_for.set(trace.source_text)
state.bound(st.text_input, "Second sentence (by default the current one with a word changed)", own.other,
             help=f"Up to {MAX_INPUT_CHARS:,} characters.")
try:
    check_text(own.other.get(), "the second sentence")
    with st.spinner("Translating the second sentence…"):
        other = session.trace(own.other.get())
except ValueError as err:
    widgets.input_problem(err, "The second sentence cannot be used: ")
else:
    show_pair(trace, other, (kind, layer, head), ("Sentence 1", "Sentence 2"), "cmp_sentences")

# --- two models --------------------------------------------------------------------------------------------------
st.subheader("Two models, one sentence")
others = [m for m in compare_lm.translators() if m != session.name]  # a language model: from its own Compare
if len(others) < len(sessions.model_names()) - 1:
    st.caption("Language models are compared with a translator from their own Compare page: open one in the "
               "sidebar, and it is prompted to translate this sentence's language beside a translator.")
if not others:
    st.info(f"Only one model is available ({session.name}): put a second model directory into "
            f"{sessions.roots_label()} to compare two models on the same sentence.")
    st.stop()
state.clamp_choice(own.model, others, others[0], "Model")
state.bound(st.selectbox, "Second model", own.model, others)
second = own.model.get()
try:
    with st.spinner(f"Translating with {second}…"):
        other, other_lang = session.trace_of_model(second, trace.source_text, SHARED.target.get())
except (CheckpointError, OSError, ValueError, RuntimeError) as err:
    st.error(texts.md_escape(f"Model {second} cannot be used: {err}"))
    st.stop()
lang = session.model.languages.target
if language_name(other_lang) != language_name(lang):  # a fixed pair, or a many-to-many model without that language
    st.info(texts.md_escape(f"{second} cannot translate into {language_name(lang)} ({lang}): it translates into "
                            f"{language_name(other_lang)} ({other_lang}), so the two translations differ in language."))
if layer >= other.num_layers[kind] or (isinstance(head, int) and head >= other.num_heads):
    st.info(texts.md_escape(
        f"Model {second} has {other.num_layers[kind]} {kind} layers and {other.num_heads} heads: layer {layer + 1}"
        + (f", head {head + 1}" if isinstance(head, int) else "") + " does not exist there. Pick a smaller layer or "
        "head (or mean / max over heads) to compare the two models."))
    st.stop()
show_pair(trace, other, (kind, layer, head), (session.name, second), "cmp_models")
