"""Complete & explore with a mixture of experts open (Mixtral, gpt-oss): each token's experts and router weights in a
chosen layer (tokens x experts), and how a head's attention relates to that routing (one small table)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import completion, state, widgets
from app.page_settings import EXPLORE as own
from viz_model.analysis.expert_routing import attention_by_routing, routing_matrix
from viz_model.plot import expert_figures
from viz_model.trace import AttentionTrace

MAX_DRAWN_EXPERTS = 64  # columns a tokens x experts heatmap can still draw legibly


def routing_section(trace: AttentionTrace) -> None:
    """The routing of the trace's model, where it is a mixture of experts (nothing otherwise)."""
    if trace.expert_routing() is None:
        return
    experts, _ = trace.expert_routing()
    layers, _, top_k = experts.shape
    count = int(trace.config.get("experts") or experts.max() + 1)
    st.subheader("Mixture of experts: where each token went")
    st.caption(f"Each layer's feed-forward network is {count} experts; a router sends each token to {top_k} of them "
               "and adds their outputs, weighted by its router weights (each token's weights sum to 1).")
    for setting, options, what in ((own.moe_layer, list(range(1, layers + 1)), "Layer"),
                                   (own.moe_head, list(range(1, trace.num_heads + 1)), "Head")):
        problem = state.clamp_choice(setting, options, 1, what)
        if problem:
            st.info(problem)
    left, right = st.columns(2)
    with left:
        state.bound(st.selectbox, "Routing layer", own.moe_layer, list(range(1, layers + 1)),
                    format_func=lambda v: f"Layer {v} of {layers}")
    with right:
        state.bound(st.selectbox, "Head compared with it", own.moe_head, list(range(1, trace.num_heads + 1)),
                    format_func=completion.grouped_head_label(trace))
    layer, head = own.moe_layer.get() - 1, own.moe_head.get() - 1
    if count > MAX_DRAWN_EXPERTS:
        st.info(f"This model has {count} experts a layer, more than the {MAX_DRAWN_EXPERTS} columns this page draws: "
                "the tokens x experts heatmap is left out; the table below still compares the routing with the head.")
    else:
        fig = expert_figures.routing_heatmap(routing_matrix(trace, layer), trace.target_tokens, layer,
                                             completion.prompt_length(trace))
        widgets.chart(fig, f"experts-layer{layer + 1}")
    splits = attention_by_routing(trace, layer, head)
    st.dataframe([{"pairs (query, earlier key)": s.name, "count": s.pairs,
                   "mean attention": None if np.isnan(s.mean_weight) else round(s.mean_weight, 4),
                   "share of the head's attention": None if np.isnan(s.share) else f"{s.share:.1%}"}
                  for s in splits], hide_index=True, width="stretch")
    st.caption(f"Layer {layer + 1}'s head {head + 1} against the same layer's routing: its mean weight on an earlier "
               "key when the two tokens went to the same first expert or not, and when they share any chosen expert "
               "or none. A head that reads mostly tokens routed alike has a larger mean on the first rows.")
