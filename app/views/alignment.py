"""Alignment & rollout: cross-attention read as a word alignment (links, AER against a typed gold alignment), and
attention rollout / flow through the self-attention layers next to the raw attention."""

import numpy as np
import streamlit as st

from app import analyze_pages, sessions, state, texts, tracing, widgets
from app.page_settings import ALIGNMENT as own
from viz_model.analysis import rollout, word_alignment
from viz_model.nn import kinds
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
st.subheader("Attention rollout and attention flow")
st.caption("A layer's attention mixes tokens that earlier layers already mixed. Rollout multiplies the layers' "
           "head-averaged maps (with the residual connection as the identity); flow treats them as a network of "
           "pipes and asks how much can flow from each input token to each position (Abnar & Zuidema, 2020).")
columns = st.columns(3)
with columns[0]:
    state.clamp_choice(own.rollout_kind, list(SELF_KINDS), "encoder", "Attention kind")
    state.bound(st.radio, "Self-attention", own.rollout_kind, list(SELF_KINDS), horizontal=True,
                format_func=kinds.KIND_LABELS.get)
kind = own.rollout_kind.get()
kind_layers = trace.num_layers[kind]
with columns[1]:
    options = list(range(1, kind_layers + 1))
    state.clamp_choice(own.rollout_layer, options, kind_layers, "Layer")
    state.bound(st.selectbox, "Through layer", own.rollout_layer, options,
                format_func=lambda v: f"Layer {v} of {kind_layers}")
with columns[2]:
    own.residual.init()
    state.bound(st.slider, "Residual share (identity)", own.residual, 0.0, 1.0, step=0.05,
                help="How much of each position passes a layer unchanged through the residual connection.")
layer, residual = int(own.rollout_layer.get()) - 1, float(own.residual.get())
maps = trace.attentions(kind)
queries, keys = trace.axes(kind)
panels = [("raw", maps[layer].mean(axis=0), f"Raw attention, layer {layer + 1} (mean over heads)"),
          ("rollout", rollout.attention_rollout(maps, residual)[layer], f"Rollout through layers 1–{layer + 1}")]
if len(keys) <= analyze_pages.FLOW_MAX_TOKENS:
    with st.spinner("Computing attention flow…"):
        flow = analyze_pages.compute_flow([np.asarray(m) for m in maps[:layer + 1]], residual)
    panels.append(("flow", flow, f"Flow through layers 1–{layer + 1}"))
# side by side only two fit: three columns squeezed each map to ~80 px, so one row of two and one below
for index, (what, weights, title) in enumerate(panels):
    if index % 2 == 0:
        row = st.columns(2)
    with row[index % 2]:
        fig = analysis_figures.token_map_figure(weights, queries, keys, kind, layer, title)
        widgets.chart(fig, f"{kind}-{what}-layer{layer + 1}", key=f"ro_{what}_chart")
        widgets.exports(fig, f"{kind}-{what}-layer{layer + 1}", f"ro_{what}")
if len(keys) > analyze_pages.FLOW_MAX_TOKENS:
    st.info(f"Attention flow is shown for up to {analyze_pages.FLOW_MAX_TOKENS} tokens: it solves one maximum-flow "
            f"problem per pair of tokens ({len(keys)}² here). Shorten the sentence to see it.")
