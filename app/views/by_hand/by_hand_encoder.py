"""Attention by hand with an encoder open: one head of the model on the text (and its second sentence), step by step
from the layer's own weights (`encoder_steps`): its queries, keys and values, the scores (DeBERTa's position terms
added), the window of a local layer, the softmax and the mix of values, checked against the traced map."""

import dataclasses

import numpy as np
import pandas as pd
import streamlit as st

from app import fill_in, sessions, state, widgets
from app.page_settings import BY_HAND as own
from app.sessions import ModelRef, load_model
from app.views.by_hand.encoder_steps import encoder_head_steps
from app.views.by_hand.head_steps import HeadSteps, every_query, pick_head, query_table
from viz_model.lessons import typed_matrices


@st.cache_data(show_spinner=False, max_entries=8)
def cached_steps(ref: ModelRef, ids: tuple[int, ...], type_ids: tuple[int, ...], layer: int, head: int) -> HeadSteps:
    """`encoder_head_steps` of the model `ref` names, cached."""
    return encoder_head_steps(load_model(ref), list(ids), list(type_ids), layer, head)  # type: ignore[arg-type]


session = sessions.require_session()
cfg = session.model.config
st.title("Attention by hand")
st.caption("One head of the open encoder, worked through on your text with the layer's own weights: the query, key "
           "and value projections, the rotation or the position terms the model adds, the scaled scores and the "
           "softmax, then the mix of values. An encoder has no causal mask: every token sees every other (a local "
           "layer, only its window). The result is checked against the map the model recorded.")
st.latex(r"\mathrm{weights} = \mathrm{softmax}\!\left(\frac{q_i\,k_j^\top}{\sqrt{d_k}} + M_{ij}\right),"
         r"\qquad \mathrm{output}_i = \sum_j \mathrm{weights}_{ij}\, v_j")
trace = fill_in.reading_or_stop(session)
layers, heads, n = trace.num_layers["encoder"], trace.num_heads, len(trace.source_tokens)
labels = [f"{j}: {t}" for j, t in enumerate(trace.source_tokens)]
masks = session.model.mask_positions(trace.source_ids)  # the query followed first (the head or not)
a, b, c = st.columns(3)
pick_head((a, b), own.enc_layer, own.enc_head, layers, heads, lambda v: f"Head {v} of {heads}")
with c:
    state.clamp_choice(own.enc_query, list(range(n)), masks[0] if masks else 0, "Query")
    state.bound(st.selectbox, "Follow the query of token", own.enc_query, list(range(n)),
                format_func=lambda i: labels[i])
i, layer, head = int(own.enc_query.get()), int(own.enc_layer.get()) - 1, int(own.enc_head.get()) - 1
with st.spinner("Working the head through…"):
    steps = cached_steps(session.ref.stored, tuple(trace.source_ids), tuple(trace.settings["type_ids"]), layer, head)
# checked against the map the trace recorded while it read the text (the one Fill in the blank & explore draws)
steps = dataclasses.replace(steps, recorded=np.asarray(trace.head_map("encoder", layer, head), dtype=np.float64))

st.subheader("1. Queries, keys and values")
st.caption(f"x: the layer's input as its attention reads it ({n} tokens × d_model = {cfg.d_model}"
           + (", after the layer's norm" if cfg.norm == "pre" else "") + f"). q = x W_q, k = x W_k and v = x W_v, "
           f"this head's {steps.q.shape[1]} columns (d_k).")
stages = [("q: x W_q", steps.q_projected), ("k: x W_k", steps.k_projected)]
if steps.rotated:
    stages += [("q: after RoPE", steps.q), ("k: after RoPE", steps.k)]
stages.append(("v: x W_v", steps.values))
for tab, (name, values) in zip(st.tabs([name for name, _ in stages]), stages):
    with tab:
        widgets.matrix_table(typed_matrices.labelled(values, labels, f"{name[0]}·"), digits=3, height=300)
if steps.rotated:
    st.caption(f"RoPE turns each pair of q's and k's coordinates by an angle that grows with the token's position "
               f"(this layer's base: {cfg.windowed_rope_base if steps.window is not None else cfg.rope_base:g}), so "
               "q_i · k_j depends on i − j.")
elif steps.bias is not None:
    st.caption("DeBERTa puts position into the scores: its content-to-position and position-to-content terms, "
               "already divided by the scale, are added to q·k ÷ √(d_k × (1 + terms)) (the column below).")
else:
    st.caption(f"This model adds {cfg.positional} positions to its input: they are in x already.")

st.subheader(f"2. The scores of token {i}'s query and the softmax")
window = ("" if steps.window is None else
          f" This is a local layer: every key more than {steps.window} tokens away gets −∞, so its weight is 0.")
st.caption(f"Each key's score q·k ÷ {steps.divisor:.4g}; no key is masked in an encoder layer that sees every "
           f"token.{window} The softmax of the row sums to 1.")
st.dataframe(query_table(steps, labels, i, bias="+ c2p + p2c (DeBERTa)").style.format(precision=4),
             hide_index=True, width="stretch")
every_query(steps, trace.source_tokens, "encoder", layer, head, "abh_enc",
            "while it read the text (the one Fill in the blank & explore draws)")

st.subheader(f"4. Token {i}'s output: the weights mix the values")
output = steps.weights[i] @ steps.values
st.dataframe(pd.DataFrame([output], index=[f"output of {labels[i]}"],
                          columns=[f"d{j}" for j in range(len(output))]).style.format(precision=4), width="stretch")
st.caption(f"Σ_j weight_ij v_j: this head's {len(output)} numbers for token {i}; the layer joins every head's and "
           "projects them with W_o.")
