"""Decoding step by step: scrub through the output of the user's sentence (tokens so far, top-k, cross-attention of
every head, the growing causal mask), then the beam search tree and greedy vs beam (a language model's:
`decoding_lm`)."""

import streamlit as st

from app import sessions, state, texts, tracing, widgets
from app.page_settings import DECODING as own
from app.shared_settings import SHARED
from app.views.decoding import decoding_steps
from viz_model.search.decoding import BeamTree
from viz_model.search.settings import MAX_BEAM, MAX_LENGTH_PENALTY

session = sessions.require_session()

st.title("Decoding step by step")
st.caption("The decoder writes the translation one token at a time: at step t it reads the tokens so far, attends to "
           "the source, and scores every token of the vocabulary for the next position.")
trace = tracing.trace_or_stop(session)
widgets.translation_panel(trace)

state.page_link(own)

# --- step slider -------------------------------------------------------------------------------------------------
steps = len(trace.steps)
own.step.init()
if not 1 <= int(own.step.get()) <= steps:
    own.step.set(1)
if steps > 1:
    state.bound(st.slider, "Step", own.step, 1, steps, help="Drag to move through the output, one token per step.")
t = int(own.step.get()) - 1
step = trace.steps[t]
so_far = [texts.md_escape(tok) for tok in trace.target_tokens[:t + 1]]
st.markdown(f"**Step {t + 1} of {steps}.** The decoder has read: " + " · ".join(so_far)
            + f" → it writes **{texts.md_escape(step.token)}** (p = {step.probability:.3f})")
note = trace.step_note(t)
if note is not None:
    st.warning(f"Not the top candidate below: {texts.md_escape(note)}.", icon=":material/info:")

decoding_steps.step_panels(
    trace, t, t + 1, "cross", trace.source_tokens,
    lambda layer: f"{texts.count(trace.num_heads, 'head', 'Each of the')}: where the query of this step looks in the "
    "source.", "Row t is the query of step t: it may attend to the decoder inputs 0..t; later rows do not exist yet.")

# --- beam search -------------------------------------------------------------------------------------------------
st.subheader("Beam search")
transformers_rule = session.model.search_settings(session.rule).rule == "transformers"
if transformers_rule:
    ranking = ("Finished hypotheses are ranked by log p / |Y|^α (transformers' length_penalty). As transformers' "
               "generate does, each step ranks the best 2 × beam continuations over all hypotheses, keeps the best "
               "beam that did not end, and stops when no hypothesis still running can beat the worst of the beam "
               "best finished ones (early_stopping from the model's generation config).")
else:
    ranking = ("Finished hypotheses are ranked by log p divided by the length penalty ((5 + |Y|) / 6)^α. The search "
               "stops when the best continuation of a step is </s>, or sooner when no live hypothesis can still "
               "beat the best finished one.")
st.caption("Beam search keeps the best few partial translations at every step instead of only the best one. Each "
           "node is a continuation it looked at: kept in the beam (blue), finished with </s> (green), or pruned "
           "(grey); the chosen translation is the red path. " + ranking)
precision = session.model.search_precision
if precision == "int8":
    st.caption("The search runs with int8 copies of the decoder's weights (sidebar: Search precision): the scores in "
               "this section are that search's. The steps above, and every map and probability on the other pages, "
               "are recomputed in full precision for the translation it chose, so they can differ slightly.")
a, b, c = st.columns(3)
own.beam.init(max(2, session.beam) if session.beam > 1 else 4)
own.alpha.init(session.alpha)
own.pruned.init()
with a:
    state.bound(st.slider, "Beam size", own.beam, 1, MAX_BEAM)
low = -MAX_LENGTH_PENALTY if transformers_rule else 0.0
own.alpha.set(min(max(float(own.alpha.get()), low), MAX_LENGTH_PENALTY))
with b:
    state.bound(st.slider, "Length penalty α", own.alpha, low, MAX_LENGTH_PENALTY, step=0.1)
with c:
    state.bound(st.slider, "Pruned continuations drawn per hypothesis", own.pruned, 0, 2 * MAX_BEAM,
                 help="0 = as many as the beam size. The search ranks the best 2 × beam of each hypothesis.")
beam, alpha = int(own.beam.get()), float(own.alpha.get())
text = SHARED.sentence.get("")
try:
    with st.spinner("Searching…"):
        tree: BeamTree = session.beam_tree(text, beam, alpha)
        greedy: BeamTree = session.beam_tree(text, 1, alpha)
except ValueError as err:
    st.error(f"The search cannot run on this sentence: {err}")
    st.stop()
decoding_steps.search_results(tree, greedy, session.model.tokenizer.piece, session.model.tokenizer.decode,
                              "translation", precision)
if SHARED.target.get():
    st.caption("The steps above follow the forced target; the search below translates the sentence freely.")
