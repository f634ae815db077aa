"""The training recipe with a translation model open: the learning-rate schedule, label smoothing, the model's curves
and card, the architecture with tensor shapes for the user's sentence, and why self-attention (measured live)."""

import streamlit as st

from app import sessions, tracing, widgets
from app.views.training import recipe_sections
from viz_model.nn.shapes import architecture
from viz_model.plot import training_figures

session = sessions.require_session()
model = session.model
config = model.config
facts = model.training_facts  # training_facts.json: the recipe as data (None for a model without one)
events, log_problem = recipe_sections.read_log(model.directory)

st.title("The training recipe")
if log_problem:
    st.warning(f"The training log is not read: {log_problem}")
if model.imported:
    st.info(f"{model.name} was not trained by this project: it was imported from another framework, and its "
            "training is documented where it came from (its model card, at the bottom of this page, names the "
            "source). The figures below teach the paper's recipe, with the settings you choose.")
else:
    st.caption("How the model on this page was trained, next to the paper's recipe: Adam (β₁ 0.9, β₂ 0.98, ε 1e-9) "
               "with a warm-up schedule, dropout 0.1 and label smoothing 0.1.")
recipe_sections.schedule_and_smoothing(config, facts, events)
recipe_sections.curves_and_card(model, events, facts, model.imported, perplexity=False, examples="pairs")

# --- architecture ------------------------------------------------------------------------------------------------
st.subheader("The architecture, with the shapes for your sentence")
trace = tracing.sentence_and_trace(session)
if trace is not None:
    stages = architecture(config, len(trace.source_tokens), len(trace.target_tokens))
    fig = training_figures.architecture_figure(stages, config.encoder_layers, config.decoder_layers, config.norm)
    widgets.chart(fig, "architecture", key="tr_arch_chart")
    widgets.exports(fig, "architecture", "tr_arch")
    st.caption(f"{len(trace.source_tokens)} source tokens, {len(trace.target_tokens)} decoder inputs; "
               f"{config.heads} heads of d_k = {config.d_head}; {config.norm}-LN; vocabulary {config.vocab_size:,}. "
               "The attention shapes are those the trace recorded; every stage is listed below.")
    with st.expander("Every stage", expanded=False):
        st.dataframe([{"part": s.part, "stage": s.stage, "shape": " × ".join(str(v) for v in s.shape),
                       "note": s.note} for s in stages], hide_index=True, width="stretch")
recipe_sections.why_self_attention()
