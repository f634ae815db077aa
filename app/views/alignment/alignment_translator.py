"""Alignment & rollout: cross-attention read as a word alignment (links, AER against a typed gold alignment), and
attention rollout / flow through the self-attention layers next to the raw attention."""

import streamlit as st

from app import analyze_pages, sessions, state, texts, tracing, widgets
from app.page_settings import ALIGNMENT as own
from app.views.alignment import rollout_section
from viz_model.analysis import word_alignment
from viz_model.plot import analysis_figures

ROWS = {"output": "the query that predicted it", "input": "the query that read it (shifted)"}
SELF_KINDS = ("encoder", "decoder")

session = sessions.require_session()

st.title("Alignment & rollout")
st.caption("Cross-attention shows which source words the decoder looked at while writing each target word: read as "
           "links, it is a word alignment. Rollout and flow follow attention through every layer at once.")
trace = tracing.trace_or_stop(session)

# --- word alignment ----------------------------------------------------------------------------------------------
st.subheader("Cross-attention as word alignment")
cross_layers, head_count = trace.num_layers["cross"], trace.num_heads
layer_options = list(range(1, cross_layers + 1))
head_options = ["mean", *range(1, head_count + 1)]
columns = st.columns(4)
with columns[0]:
    state.clamp_choice(own.layer, layer_options, cross_layers, "Layer")
    state.bound(st.selectbox, "Cross-attention layer", own.layer, layer_options,
                format_func=lambda v: f"Layer {v} of {cross_layers}")
with columns[1]:
    state.clamp_choice(own.head, head_options, "mean", "Head")
    state.bound(st.selectbox, "Head", own.head, head_options, format_func=lambda v: state.head_label(v, head_count))
with columns[2]:
    own.rows.init()
    state.bound(st.radio, "A target word is", own.rows, list(ROWS), format_func=ROWS.get)
with columns[3]:
    own.threshold.init()
    state.bound(st.slider, "Link only above weight", own.threshold, 0.0, 1.0, step=0.05,
                help="Each target word is linked to its most attended source word when that weight reaches this.")
layer, rows, threshold = int(own.layer.get()) - 1, own.rows.get(), float(own.threshold.get())
head = state.head_index(own.head.get())
words = word_alignment.layer_word_attention(trace, layer, rows)
source_words, target_words = words.source_words, words.target_words
if not source_words or not target_words:
    st.info("This sentence or its translation has no words to align.")
else:
    weights = words.weights.mean(axis=0) if head == "mean" else words.weights[head]
    links = word_alignment.alignment_links(weights, threshold)
    st.caption("Words, numbered from 0 as in the gold alignment below.")
    for side, side_words in (("Source", source_words), ("Target", target_words)):
        st.caption(f"{side}: " + texts.md_escape(" · ".join(f"{i} {w}" for i, w in enumerate(side_words))))
    own.gold.init()
    state.bound(st.text_input, "Gold alignment for this sentence (optional, Pharaoh format)", own.gold,
                max_chars=analyze_pages.MAX_GOLD_CHARS,
                placeholder="0-0 1-1 2-3 (source word - target word; i?j possible)",
                help="Pairs i-j: source word i is aligned to target word j, both from 0. i?j or i-j-P marks a "
                     "possible link. The target side is the translation shown (or the forced target).")
    gold = None
    if own.gold.get().strip():
        try:
            gold = analyze_pages.parse_gold(own.gold.get(), len(source_words), len(target_words))
        except ValueError as err:
            widgets.input_problem(err, "The gold alignment cannot be used: ")
    name = f"alignment-layer{layer + 1}-{own.head.get()}"
    title = f"Cross-attention links, layer {layer + 1}, {'mean over heads' if head == 'mean' else f'head {head + 1}'}"
    gold_links = gold.possible if gold is not None else ()
    fig = analysis_figures.alignment_figure(weights, source_words, target_words, links, title, gold_links)
    widgets.chart(fig, name, key="al_links_chart")
    st.caption("Each target word links to the source word it attended to most; thicker = more weight. "
               + ("Dashed green: the gold links." if gold is not None else ""))
    widgets.exports(fig, name, "al_links")
    fig = analysis_figures.word_map_figure(weights, source_words, target_words, layer, head, links, gold_links, rows)
    widgets.chart(fig, f"{name}-map", key="al_map_chart")
    widgets.exports(fig, f"{name}-map", "al_map")
    if gold is not None:
        table = word_alignment.attention_aer([trace], [gold], rows, threshold)
        fig = analysis_figures.aer_grid(table, cross_layers, head_count,
                                        "Alignment error rate of every cross-attention head "
                                        "(lower is better)")
        widgets.chart(fig, "aer", key="al_aer_chart")
        widgets.exports(fig, "aer", "al_aer")
        st.dataframe(analyze_pages.display_aer(table), hide_index=True, width="stretch")
        st.caption("AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|) (Och & Ney, 2003): A are the links above, S the sure and "
                   "P the possible gold links. “mean” rows use the layer's mean over heads.")

# --- rollout and flow --------------------------------------------------------------------------------------------
rollout_section.rollout_section(
    trace, SELF_KINDS, "A layer's attention mixes tokens that earlier layers already mixed. Rollout multiplies the "
    "layers' head-averaged maps (with the residual connection as the identity); flow treats them as a network of pipes "
    "and asks how much can flow from each input token to each position (Abnar & Zuidema, 2020).")
