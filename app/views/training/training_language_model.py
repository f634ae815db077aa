"""The training recipe with a language model open: its run (a model `viz-model train` trained) next to the paper's
recipe, its curves and card, the decoder-only architecture with the tensor shapes for the prompt and its
continuation, and why self-attention (measured live)."""

import streamlit as st

from app import sessions
from app.views.training import recipe_sections, training_lm

session = sessions.require_session()
model = session.model
events, log_problem = recipe_sections.read_log(model.directory)

st.title("The training recipe")
if log_problem:
    st.warning(f"The training log is not read: {log_problem}")
if not events:
    st.info(training_lm.no_log_line(model))
    st.stop()
st.caption("How this language model was trained (next-token prediction on its corpus), next to "
           "the paper's recipe: Adam with a warm-up schedule and dropout; its curves show loss and perplexity "
           "(BLEU measures translations).")
facts = training_lm.facts_of(model)  # training_facts.json: the recipe as data (None for a model without one)
recipe_sections.schedule_and_smoothing(model.config, facts, events)
recipe_sections.curves_and_card(model, events, facts, training_lm.imported(model), perplexity=True, examples="texts")
training_lm.architecture_section(session)
recipe_sections.why_self_attention()
