"""Positional encoding: the PE matrix of the sentence's positions, chosen sinusoids, and embedding vs embedding+PE."""

import streamlit as st

from app import common, figures
from viz_model.positional import sinusoidal_table

ss = st.session_state
session = common.require_session()
config = session.model.config

st.title("Positional encoding")
sinusoidal = config.positional == "sinusoidal"
st.caption("Attention by itself ignores word order; the model adds a position vector to each token's embedding. "
           + ("This model uses the paper's fixed sinusoids: PE(pos, 2i) = sin(pos / 10000^(2i/d)), "
              "PE(pos, 2i+1) = cos(pos / 10000^(2i/d))." if sinusoidal else
              "This model learned its position vectors during training."))
with st.expander("Change the sentence", expanded=False):
    common.sentence_form()
trace = common.current_trace(session)
if trace is None:
    st.stop()

common.clamp_choice("pe_side", ["source", "target"], "source", "Side")
common.bound(st.radio, "Side", "pe_side", ["source", "target"], horizontal=True,
             format_func={"source": "Source (encoder input)", "target": "Target (decoder input)"}.get)
side = ss["pe_side"]
tokens = trace.source_tokens if side == "source" else trace.target_tokens
pe = trace.source_positional if side == "source" else trace.target_positional
embeddings = trace.source_embeddings if side == "source" else trace.target_embeddings
d_model = pe.shape[1]

fig = figures.positional_heatmap(pe, tokens, f"Positional encodings of the {len(tokens)} {side} positions "
                                 f"(d_model = {d_model})")
common.chart(fig, f"{side}-positional-encodings", key="pe_chart")
common.exports(fig, f"{side}-positional-encodings", "pe")

st.subheader("Sinusoids")
dims = list(range(d_model))
default_dims = sorted({0, 1, min(6, d_model - 2), min(7, d_model - 1), d_model // 2, d_model // 2 + 1})
ss.setdefault("pe_dims", default_dims)
ss["pe_dims"] = [d for d in ss["pe_dims"] if d in dims]
common.bound(st.multiselect, "Dimensions", "pe_dims", dims, max_selections=12,
             format_func=lambda d: f"{d} ({'sin' if d % 2 == 0 else 'cos'})" if sinusoidal else str(d))
length = min(config.max_positions, max(64, 2 * len(tokens)))
if sinusoidal:
    table = sinusoidal_table(length, d_model).numpy()
else:
    table = session.model.network.positional_encodings(length, side).detach().float().cpu().numpy()
if ss["pe_dims"]:
    fig = figures.sinusoid_figure(table, ss["pe_dims"], marked=len(tokens))
    common.chart(fig, "sinusoids", key="sin_chart")
    common.exports(fig, "sinusoids", "sin")
else:
    st.info("Pick at least one dimension.")

st.subheader("Embedding + position")
options = list(range(len(tokens)))
common.clamp_choice("pe_token", options, min(1, len(tokens) - 1), "Token")
common.bound(st.selectbox, "Token", "pe_token", options, format_func=lambda i: f"{i}: {tokens[i]}")
index = int(ss["pe_token"])
fig = figures.embedding_figure(embeddings[index], pe[index], tokens[index], index)
common.chart(fig, "embedding-vs-pe", key="emb_chart")
common.exports(fig, "embedding-vs-pe", "emb")

fig = figures.positional_similarity(pe, tokens)
common.chart(fig, "positional-similarity", key="sim_chart")
common.exports(fig, "positional-similarity", "sim")
