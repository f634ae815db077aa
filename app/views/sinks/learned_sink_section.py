"""Attention sinks with a model whose heads have learned sink logits (gpt-oss): the share of attention each head's
sink takes (a layer x head grid) beside the first token's share, and why such a model's rows sum to less than 1."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import widgets
from viz_model.analysis.sink_logits import learned_sink_shares
from viz_model.analysis.sinks import SinkShares
from viz_model.plot import analysis_figures
from viz_model.trace import AttentionTrace

WHY_ROWS = ("Each head of this model has a learned sink logit: its softmax runs over the keys and that logit, and the "
            "sink's share is dropped, so every row of its maps sums to 1 minus the share the sink took (attention "
            "given to nothing, where other models must give it to a token such as the first).")


def learned_sinks(trace: AttentionTrace, shares: SinkShares) -> None:
    """The learned sinks' share per layer and head beside the first token's (nothing for a model without them)."""
    learned = learned_sink_shares(trace)
    if learned is None:
        return
    st.subheader("Learned sinks")
    st.info(WHY_ROWS)
    left, right = st.columns(2)
    for column, values, title, name, scale in (
            (left, learned, "Share the learned sink takes (1 − row sum, mean over rows)", "sink share", "Oranges"),
            (right, shares.first_token, "Share on the first token (emergent sink)", "first-token share", "Blues")):
        labels = np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(values)
        fig = analysis_figures.head_grid({"decoder": values}, title, name, scale, labels={"decoder": labels},
                                         unit=True)
        with column:
            widgets.chart(fig, name.replace(" ", "-"))
    a, b = st.columns(2)
    a.metric("Mean learned-sink share", f"{np.mean(learned):.3f}",
             help="Each head's mean of 1 − its row's sum over the query rows, averaged over heads.")
    b.metric("Mean first-token share", f"{np.nanmean(shares.first_token):.3f}",
             help="Each head's mean weight on the first token over the queries after it, averaged over heads.")
