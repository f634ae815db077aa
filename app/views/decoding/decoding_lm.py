"""Decoding step by step with a language model open: scrub through the continuation (what the model has read, its
top candidates, each head's self-attention row of the step, the growing causal mask), then the beam tree of the
prompt's continuation and greedy against beam search."""

from __future__ import annotations

import streamlit as st

from app import completion, state, texts
from app.page_settings import DECODING as own
from app.page_settings import EXPLORE
from app.sessions import ModelRef, Session, load_model
from app.views.decoding import decoding_steps
from viz_model.kinds.language_model import MAX_BEAM
from viz_model.plot import window_bands
from viz_model.search.causal_tree import causal_beam_tree
from viz_model.search.hypotheses import BeamTree
from viz_model.search.settings import MAX_LENGTH_PENALTY

SHOWN_PROMPT_TOKENS = 12  # the step line shows the prompt's last tokens only


@st.cache_data(show_spinner=False, max_entries=8)
def lm_beam_tree(ref: ModelRef, prompt: tuple[int, ...], beam: int, alpha: float, new_tokens: int) -> BeamTree:
    """The recorded search of the continuation of `prompt` (transformers' rule, the model's generation settings)."""
    model = load_model(ref)
    return causal_beam_tree(model.network, list(prompt), beam, alpha, new_tokens, model.tokenizer.eos_ids,
                            model.search)


def steps_section(trace) -> None:
    """The step slider, the step's candidates, its self-attention rows and the causal mask so far."""
    p = completion.prompt_length(trace)
    count = max(len(trace.target_tokens) - p, 1)  # one decision per new token
    own.step.init()
    if not 1 <= int(own.step.get()) <= count:
        own.step.set(1)
    if count > 1:
        state.bound(st.slider, "Step", own.step, 1, count, help="Drag to move through the continuation, one token "
                    "per step.")
    s = int(own.step.get())
    t = p - 2 + s  # the position whose query chooses the step's token
    step = trace.steps[t]
    read = [texts.md_escape(tok) for tok in trace.target_tokens[:t + 1]]
    shown = read if len(read) <= SHOWN_PROMPT_TOKENS else ["…", *read[-SHOWN_PROMPT_TOKENS:]]
    st.markdown(f"**Step {s} of {count}.** The model has read {texts.count(t + 1, 'token')}: " + " · ".join(shown)
                + f" → it writes **{texts.md_escape(step.token)}** (p = {step.probability:.3f})")
    windows = window_bands.windows(trace)
    decoding_steps.step_panels(
        trace, t, s, "decoder", trace.target_tokens[:t + 1],
        lambda layer: f"{texts.count(trace.num_heads, 'head', 'Each of the')}: where the query of this step looks "
        "among the prompt and the tokens written so far." + ("" if windows[layer] is None else
                                                             f" This layer's sliding window shows it the last "
                                                             f"{windows[layer]} only."),
        "Row t is the query of position t: it may attend to tokens 0..t; later rows do not exist yet.")


def beam_section(session: Session, trace) -> None:
    """The beam tree of the prompt's continuation, and greedy against beam search."""
    model = session.model
    st.subheader("Beam search")
    st.caption("Beam search keeps the best few partial continuations at every step instead of only the best one. "
               "Each node is a continuation it looked at: kept in the beam (blue), finished with an end-of-text "
               "token or at the length limit (green), or pruned (grey); the chosen continuation is the red path. As "
               "transformers' generate does, each step ranks the best 2 × beam continuations over all hypotheses, "
               "and finished ones are ranked by log p / |Y|^α (length_penalty), with the model's generation "
               "settings (repetition penalty, n-gram ban).")
    a, b, c = st.columns(3)
    own.beam.init(max(2, model.search.num_beams) if model.search.num_beams > 1 else 4)
    own.alpha.init(float(model.search.length_penalty))
    own.pruned.init()
    with a:
        state.bound(st.slider, "Beam size", own.beam, 1, MAX_BEAM)
    own.alpha.set(min(max(float(own.alpha.get()), -MAX_LENGTH_PENALTY), MAX_LENGTH_PENALTY))
    with b:
        state.bound(st.slider, "Length penalty α", own.alpha, -MAX_LENGTH_PENALTY, MAX_LENGTH_PENALTY, step=0.1)
    with c:
        state.bound(st.slider, "Pruned continuations drawn per hypothesis", own.pruned, 0, 2 * MAX_BEAM,
                    help="0 = as many as the beam size. The search ranks the best 2 × beam of each hypothesis.")
    beam, alpha = int(own.beam.get()), float(own.alpha.get())
    prompt = tuple(trace.target_ids[:completion.prompt_length(trace)])
    new_tokens = int(EXPLORE.new_tokens.get())
    try:
        with st.spinner("Searching…"):
            tree = lm_beam_tree(session.ref.stored, prompt, beam, alpha, new_tokens)
            greedy = lm_beam_tree(session.ref.stored, prompt, 1, alpha, new_tokens)
    except ValueError as err:
        st.error(f"The search cannot run on this prompt: {err}")
        return
    decoding_steps.search_results(tree, greedy, model.tokenizer.piece, model.tokenizer.decode, "continuation")


def page(session: Session) -> None:
    """The Decoding page for the language model of `session`."""
    st.title("Decoding step by step")
    st.caption("The language model writes its continuation one token at a time: at step t it reads the prompt and "
               "the tokens so far (self-attention, causal) and scores every token of the vocabulary for the next.")
    trace = completion.current_completion(session)
    if trace is None:
        st.stop()
    completion.completion_panel(trace)
    state.page_link(own)
    steps_section(trace)
    beam_section(session, trace)
