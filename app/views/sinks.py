"""Attention sinks: each head's share on the first token (a layer x head grid), the other tokens that draw a large
share, why softmax needs such a place, and the switch that hides the first token (next-token distribution and
continuation before and after). With a translator: its decoder self-attention's shares, without the switch."""

from functools import partial

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import completion, sessions, state, tracing, widgets
from app.page_settings import EXPLORE
from app.page_settings import SINKS as own
from app.shared_settings import SHARED
from viz_model.analysis.sinks import HEAVY_SHARE, SinkShares, SinkSwitch, remove_sink, trace_sink_shares
from viz_model.plot import analysis_figures, figure_style
from viz_model.plot.long_map_figures import LONG_MAP_TOKENS
from viz_model.trace import AttentionTrace

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

session = sessions.require_session()
state.page_link(own)
for setting in own.settings():
    setting.init()
st.title("Attention sinks")
st.caption("How much of each head's attention lands on the first token, which other tokens draw a large share, and "
           "what the model does when the first token is hidden from every later query.")


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
                                     "first-token share", "Blues", selected=chosen, labels={"decoder": labels})
    fig.update_layout(coloraxis=dict(cmin=0.0, cmax=1.0))
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
    long = len(ticks) > LONG_MAP_TOKENS  # a bar a token at its position, the token on hover
    fig = go.Figure(go.Bar(x=list(range(len(ticks))) if long else ticks, y=np.nan_to_num(values), customdata=ticks,
                           marker_color=["#1f77b4"] + ["#9ecae1"] * (len(ticks) - 1),
                           hovertemplate="%{customdata}<br>share %{y:.4f}<extra></extra>"))
    if long:
        fig.update_xaxes(title=dict(text="key position (hover for the token)"))
    fig.add_hline(y=shares.threshold, line=dict(color="#d62728", dash="dot", width=1))
    if boundary is not None and boundary < len(ticks):
        fig.add_vline(x=boundary - 0.5, line=dict(color=completion.BOUNDARY_COLOR, width=2, dash="dot"))
    fig.update_layout(title=f"Layer {own.layer.get()}, head {own.head.get()}: mean weight on each token over the "
                            "queries after it", yaxis=dict(title="share", range=[0, 1]), height=360,
                      margin=dict(l=40, r=20, t=50, b=80))
    widgets.chart(fig, "token-shares")


def switch_section(shares: SinkShares, trace: AttentionTrace, prompt: str | list[dict[str, str]],
                   new_tokens: int) -> None:
    """The switch: the first token (and chosen heavy prompt tokens) hidden from every later query; what changes
    (`prompt`: the text, or the chat turn, that `trace` was made of)."""
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
            result = compute_switch(session.ref.stored, prompt, new_tokens, keys)
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


if session.is_language_model:
    completion.prompt_form()
    trace = completion.current_completion(session)
    if trace is None:
        st.stop()
    what = "(prompt and continuation)"
else:
    trace = tracing.trace_or_stop(session)
    what = "(the decoder's self-attention over the translation)"
try:
    with st.spinner("Measuring every head's shares…"):
        shares = (lm_shares(trace, session.ref.stored, SHARED.sentence.get(""), int(EXPLORE.new_tokens.get()),
                            EXPLORE.chat.get(), EXPLORE.system.get("")) if session.is_language_model
                  else trace_sink_shares(trace, HEAVY_SHARE))
except ValueError as err:
    widgets.input_problem(err, "The shares cannot be measured: ")
    st.stop()
shares_grid(shares, what)
heavy_table(shares)
head_detail(shares, completion.prompt_length(trace) if session.is_language_model else None)
with st.expander("Why a head needs a place to put attention it does not want to use", expanded=False):
    st.markdown(WHY)
if session.is_language_model:
    prompt = SHARED.sentence.get("")
    switch_section(shares, trace, completion.asked_turn(prompt),
                   int(EXPLORE.new_tokens.get()))
else:
    st.info("The switch that removes the sink runs with a language model: pick one in the sidebar.")
