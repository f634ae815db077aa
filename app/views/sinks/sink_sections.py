"""Attention sinks' parts every kind of model shows: each head's share on the first token (a layer x head grid), the
other tokens that draw a large share, one head's share on every token, and why softmax needs such a place."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import streamlit as st

from app import completion, state, widgets
from app.page_settings import SINKS as own
from viz_model.analysis.sinks import SinkShares
from viz_model.plot import analysis_figures, figure_style, long_mask_figures

WHY = """
Softmax turns a head's scores into weights that **must sum to 1**: a head has no way to say "nothing here is worth
reading". A head whose job does not apply at this token still has to put its attention somewhere, and a trained model
learns a harmless place for it: a token every query can see (with causal attention, only the first one is visible
from everywhere) whose value adds little to the output. That token becomes an *attention sink*.

- Xiao et al., "Efficient Streaming Language Models with Attention Sinks" (StreamingLLM, 2023): the first tokens
  draw heavy attention whatever their content; a sliding window that drops them collapses, and four line breaks in
  their place work nearly as well, so it is the position that matters, not the meaning. Keeping a few sink tokens
  and a rolling window lets Llama-2, MPT, Falcon and Pythia stream millions of tokens.
- Evan Miller, "Attention Is Off By One" (2023): add 1 to softmax's denominator so that a head can put (almost) no
  attention anywhere.
- Sun et al., "Massive Activations in Large Language Models" (2024): a few activations, orders of magnitude larger
  than the rest, on the start token and the first "." or line break act as fixed biases that pull attention there.
- Gu et al., "When Attention Sink Emerges in Language Models" (ICLR 2025): sinks appear in every autoregressive model
  they tested, even on random tokens; they act as a key bias whose values go unused. Their measure is a key's mean
  weight over the queries from its own position on, above 0.3; this page leaves the key's own query out (the first
  token's is always 1: it sees nothing else), so a share here is a little below theirs.
"""


def heading() -> None:
    """The page's link settings, title and what it shows."""
    state.page_link(own)
    for setting in own.settings():
        setting.init()
    st.title("Attention sinks")
    st.caption("How much of each head's attention lands on the first token, which other tokens draw a large share, "
               "and what the model does when the first token is hidden from every later query.")


def measured(compute: Callable[[], SinkShares]) -> SinkShares:
    """Every head's shares (`compute()`); the page stops where they cannot be measured (said here)."""
    try:
        with st.spinner("Measuring every head's shares…"):
            return compute()
    except ValueError as err:
        widgets.input_problem(err, "The shares cannot be measured: ")
        st.stop()


def pick_head(chart_key: str) -> None:
    """A click on the grid draws that head's shares below."""
    point = state.selected_point(st.session_state.get(chart_key))
    if point is not None and len(point) == 3:
        own.layer.set(int(point[1]) + 1)
        own.head.set(int(point[2]) + 1)
        own.redraws.set(own.redraws.get() + 1)


def shares_grid(shares: SinkShares, what: str) -> None:
    """The layer x head grid of the first token's share, a click picking the head drawn below."""
    first = shares.first_token
    labels = np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(first)
    chosen = [("decoder", own.layer.get() - 1, own.head.get() - 1)]
    fig = analysis_figures.head_grid({"decoder": first}, f"Share of attention on the first token {what!s}",
                                     "first-token share", "Blues", selected=chosen, labels={"decoder": labels},
                                     unit=True)
    chart_key = f"sk_grid_{own.redraws.get()}"
    widgets.chart(fig, "first-token-share", key=chart_key, on_select=partial(pick_head, chart_key))
    a, b, c = st.columns(3)
    a.metric("Mean first-token share", f"{np.nanmean(first):.3f}",
             help="Each head's mean weight on the first token over the queries after it, averaged over heads.")
    b.metric(f"Heads above {shares.threshold:g}", f"{shares.sink_rate:.0%}",
             help="Gu et al.'s sink rate: the share of heads whose first-token share exceeds the threshold.")
    c.metric("Tokens", f"{len(shares.tokens)}")
    st.caption("A head's share on a token is its mean weight on it over the queries after it (the token's own row "
               "left out: the first query can only see itself); in a sliding-window layer, over the queries whose "
               "window still holds it. Models that put a start token first (Llama) keep their sink there; GPT-2 and "
               "Qwen put none first, and the first word takes its place. Click a head to see its share on every "
               "token.")


def heavy_table(shares: SinkShares) -> None:
    """The tokens other than the first that draw more than the threshold in some head."""
    st.subheader("Other heavy tokens")
    if not shares.heavy:
        st.info(f"No other token draws more than {shares.threshold:g} of any head's attention here.")
        return
    st.dataframe([{"position": t.position, "token": repr(t.token), "heads above": t.heads,
                   "share of heads": f"{t.head_share:.0%}", "largest share": round(t.top_share, 3),
                   "in": f"layer {t.top_layer + 1}, head {t.top_head + 1}"} for t in shares.heavy],
                 hide_index=True, width="stretch")
    st.caption(f"A token is heavy in a head when that head's share on it exceeds {shares.threshold:g} (Gu et al.'s "
               "threshold). Sun et al. found such second sinks on the first full stop or line break.")


def head_detail(shares: SinkShares, boundary: int | None) -> None:
    """One head's share on every token, its layer and head picked here or by a click on the grid."""
    layers, heads = shares.first_token.shape
    st.subheader("One head's share on every token")
    for setting, count, what in ((own.layer, layers, "Layer"), (own.head, heads, "Head")):
        problem = state.clamp_choice(setting, list(range(1, count + 1)), 1, what)
        if problem:
            st.warning(problem)
    left, right = st.columns(2)
    with left:
        state.bound(st.selectbox, "Layer", own.layer, list(range(1, layers + 1)))
    with right:
        state.bound(st.selectbox, "Head", own.head, list(range(1, heads + 1)))
    values = shares.head(own.layer.get() - 1, own.head.get() - 1)
    ticks = [f"{i} {figure_style.escape(repr(t))}" for i, t in enumerate(shares.tokens)]
    fig = long_mask_figures.token_bars(np.nan_to_num(values), ticks,
                                       marker_color=["#1f77b4"] + ["#9ecae1"] * (len(ticks) - 1),
                                       hovertemplate="%{customdata}<br>share %{y:.4f}<extra></extra>")
    fig.add_hline(y=shares.threshold, line=dict(color="#d62728", dash="dot", width=1))
    if boundary is not None and boundary < len(ticks):
        fig.add_vline(x=boundary - 0.5, line=dict(color=completion.BOUNDARY_COLOR, width=2, dash="dot"))
    fig.update_layout(title=f"Layer {own.layer.get()}, head {own.head.get()}: mean weight on each token over the "
                            "queries after it", yaxis=dict(title="share", range=[0, 1]), height=360,
                      margin=dict(l=40, r=20, t=50, b=80))
    widgets.chart(fig, "token-shares")


def every_part(shares: SinkShares, what: str, boundary: int | None) -> None:
    """The grid (`what`: the attention it measures), the heavy tokens, one head's detail (`boundary`: where the
    prompt ends, if any) and why heads need a sink."""
    shares_grid(shares, what)
    heavy_table(shares)
    head_detail(shares, boundary)
    with st.expander("Why a head needs a place to put attention it does not want to use", expanded=False):
        st.markdown(WHY)
