"""Attention sinks with a language model open: the shares of its completion (cached) and the switch that hides the
first token (next-token distribution and continuation before and after)."""

from __future__ import annotations

import streamlit as st

from app import completion, sessions, state, widgets
from app.page_settings import SINKS as own
from viz_model.analysis.sinks import HEAVY_SHARE, SinkShares, SinkSwitch, remove_sink, trace_sink_shares
from viz_model.trace import AttentionTrace


@st.cache_data(show_spinner=False, max_entries=8)
def compute_switch(ref: sessions.ModelRef, prompt: str | list[dict[str, str]], max_new_tokens: int,
                   keys: tuple[int, ...]) -> SinkSwitch:
    """`remove_sink` of the loaded language model, cached."""
    return remove_sink(sessions.load_model(ref), prompt, max_new_tokens, keys)


@st.cache_data(show_spinner=False, max_entries=8)
def lm_shares(_trace: AttentionTrace, ref: sessions.ModelRef, prompt: str, new_tokens: int, chat: bool,
              system: str) -> SinkShares:
    """`trace_sink_shares` of the completion `_trace`, cached by what it was made of (the model, the prompt, the new
    tokens, the chat turn): each head's map is read once per prompt, not on every rerun."""
    return trace_sink_shares(_trace, HEAVY_SHARE)


def switch_section(ref: sessions.ModelRef, shares: SinkShares, trace: AttentionTrace,
                   prompt: str | list[dict[str, str]], new_tokens: int) -> None:
    """The switch: the first token (and chosen heavy prompt tokens) hidden from every later query; what changes
    (`prompt`: the text, or the chat turn, that `trace` was made of; `ref`: the model's stored version)."""
    prompt_length = completion.prompt_length(trace)
    st.subheader("Remove the sink")
    state.bound(st.toggle, "Hide the first token from every later query", own.switch)
    heavy = [t.position for t in shares.heavy if t.position < prompt_length]
    own.also.set([k for k in own.also.get() if k in heavy])
    if heavy:
        state.bound(st.multiselect, "Hide these heavy prompt tokens too", own.also, heavy,
                    format_func=lambda k: f"{k} {shares.tokens[k]!r}")
    if not own.switch.get():
        st.caption("Switch it on to run the prompt again with the first token masked for every query that can see "
                   "another token (each layer's mask gains that column; the weights are not edited), and compare "
                   "the next-token distribution and the greedy continuation.")
        return
    keys = (0, *sorted(own.also.get()))
    try:
        with st.spinner("Running the prompt without the sink…"):
            result = compute_switch(ref, prompt, new_tokens, keys)
    except ValueError as err:
        widgets.input_problem(err, "The switch cannot run: ")
        return
    a, b = st.columns(2)
    a.metric("KL(intact ‖ switched)", f"{result.kl:.4f} nats",
             help="How far the next-token distribution after the prompt moved: 0 when it did not change.")
    b.metric("Total variation", f"{result.total_variation:.4f}",
             help="Half the summed absolute change of every token's probability: the probability mass that moved.")
    left, right = st.columns(2)
    with left, st.container(border=True):
        widgets.show_text("Continuation, every key visible", result.continuation)
        st.dataframe([{"next token": repr(t.token), "probability": round(t.first, 4), "switched": round(t.second, 4)}
                      for t in result.top_intact], hide_index=True, width="stretch")
    with right, st.container(border=True):
        hidden = ", ".join(repr(result.tokens[k]) for k in result.hidden)
        widgets.show_text(f"Continuation, {hidden} hidden", result.continuation_switched)
        st.dataframe([{"next token": repr(t.token), "probability": round(t.first, 4), "intact": round(t.second, 4)}
                      for t in result.top_switched], hide_index=True, width="stretch")
    windows = trace.settings.get("windows") or []
    if result.kl == 0 and windows and all(w is not None for w in windows):
        st.info("Nothing changed: every layer of this model attends through a sliding window, and the last "
                "token's windows, layer after layer, no longer reach the hidden tokens.")
    if result.ids == result.ids_switched:
        st.success("The greedy continuation did not change.")
    else:
        st.warning("The greedy continuation changed: the model leans on its sink.")
