"""Attention rollout and flow through a trace's self-attention layers next to the raw attention (the Alignment &
rollout page's second half; a language model's: its causal layers alone)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import analyze_pages, long_views, state, token_picker, widgets
from app.page_settings import ALIGNMENT as own
from viz_model.analysis import rollout
from viz_model.nn import kinds
from viz_model.plot import analysis_figures, row_strip_figures
from viz_model.trace import AttentionTrace


def rollout_section(trace: AttentionTrace, self_kinds: tuple[str, ...], caption: str) -> None:
    """The kind (of `self_kinds`), layer and residual share, then the raw map, rollout and (short inputs) flow."""
    st.subheader("Attention rollout and attention flow")
    st.caption(caption)
    columns = st.columns(3)
    with columns[0]:
        state.clamp_choice(own.rollout_kind, list(self_kinds), self_kinds[0], "Attention kind")
        state.bound(st.radio, "Self-attention", own.rollout_kind, list(self_kinds), horizontal=True,
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
    ROLLOUTS[trace.reading(kind)](trace, kind, layer, residual)


def whole_rollout(trace: AttentionTrace, kind: str, layer: int, residual: float) -> None:
    """Maps read whole: the raw map, the rollout and (short inputs) the flow, each drawn cell by cell."""
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
        st.info(f"Attention flow is shown for up to {analyze_pages.FLOW_MAX_TOKENS} tokens: it solves one "
                f"maximum-flow problem per pair of tokens ({len(keys)}² here). Shorten the input to see it.")


def row_rollout(trace: AttentionTrace, kind: str, layer: int, residual: float) -> None:
    """Maps read by rows (a long trace's): one query token's row (picked by search or on the strip), carried layer
    by layer (`rollout.rollout_rows`), beside its raw head-mean row, as strips over the prompt with their top tokens."""
    queries, keys = trace.axes(kind)
    n = len(queries)
    own.rollout_token.init(f"q{n - 1}")
    position = token_picker.token_picker(queries, own.rollout_token, what="query token", default=n - 1)

    def strips() -> go.Figure:
        raw = rollout.head_mean_rows(trace, kind, layer, slice(position, position + 1))[0]
        rolled = rollout.rollout_rows(trace, kind, [position], layer + 1, residual)[0]
        names = [f"raw, layer {layer + 1} (mean over heads)", f"rollout through layers 1–{layer + 1}"]
        return row_strip_figures.strip_figure(np.stack([raw, rolled]), keys, names, f"Token {position} "
                                              f"({queries[position]}): where it draws from, over the {n} positions",
                                              trace.settings.get("prompt_length"))

    with st.spinner("Carrying the rollout through the layers…"):
        fig = long_views.cached_figure(trace, ("rollout", kind, layer, residual, position), strips)
    raw, rolled = np.asarray(fig.data[0].z, dtype=np.float64)  # the figure's two rows: the tables list them
    name = f"{kind}-rollout-token{position}-layer{layer + 1}"
    widgets.chart(fig, name, key="ro_long_chart")
    st.caption(f"A prompt of {n} tokens: the rollout of the picked token alone, its row carried down from layer "
               f"{layer + 1} to the first (r ← r · (residual · I + (1 − residual) · mean over heads of A), rows "
               "renormalised), each layer's head mean made a block of rows at a time: never every layer's n x n "
               "maps. Pick another token to follow it.")
    widgets.exports(fig, name, "ro_long")
    left, right = st.columns(2)
    for column, values, title in ((left, rolled, "Rollout: the tokens it draws most on"),
                                  (right, raw, f"Raw attention, layer {layer + 1}: its top keys")):
        with column:
            st.markdown(f"**{title}**")
            st.dataframe(row_strip_figures.top_positions(values, keys, column="share"), hide_index=True,
                         width="stretch")
    st.info(f"Attention flow is shown for up to {analyze_pages.FLOW_MAX_TOKENS} tokens: it solves one maximum-flow "
            f"problem per pair of tokens ({n}² here). Shorten the input to see it.")


ROLLOUTS = {"whole": whole_rollout, "rows": row_rollout}  # per `AttentionTrace.reading`: how the section draws
