"""Attribution with an encoder open: which tokens of the text the prediction at each mask token depends on
(value-weighted attention, ALTI rolled out over the encoder's layers, saliency, input x gradient, integrated
gradients), every method side by side."""

import streamlit as st

from app import fill_in_changes, sessions, widgets
from app.views.attribution import attribution_lm
from app.views.attribution import attribution_sections as sections
from viz_model.attribution import METHODS, Attribution, attribute
from viz_model.plot import attribution_figures

NO_FOIL = ("The contrastive question (why this token and not another) is asked of a translation model only for now: "
           "an encoder's attribution explains its own first choice at each mask.")


@st.cache_data(show_spinner=False, max_entries=8)
def mask_attribution(ref: sessions.ModelRef, text: str, methods: tuple[str, ...], steps: int,
                     tolerance: float) -> Attribution:
    """`attribute` of the loaded encoder: the prediction at each mask token of `text`, cached."""
    result = attribute(sessions.load_model(ref), text, methods=methods, steps=steps, tolerance=tolerance)
    result.model_name = ref.name
    return result


session = sessions.require_session()
sections.heading("prediction at each mask token: which tokens of the text it depends on (its first choice's "
                 "log-probability, read at the mask).")
trace = fill_in_changes.masked_reading_or_stop(session, "Attribution")
chosen, steps, tolerance = sections.pick_methods(attribution_lm.choices(sections.CHOICES))
ranked = sections.ranked_of(chosen)
try:
    with st.spinner("Computing the attributions…"):
        result = mask_attribution(session.ref.stored, trace.source_text, tuple(m for m in METHODS if m in chosen),
                                  steps, tolerance)
except ValueError as err:
    widgets.input_problem(err, sections.CANNOT)
    st.stop()

output = sections.pick_output(result)
fig = sections.methods_chart(result, output, ranked, "text's")
sections.methods_export_and_gap(fig, result, output, ranked)
st.caption(NO_FOIL)
sections.matrix_section(ranked, lambda method: attribution_figures.contribution_figure(result, method),
                        "Rows: the prediction at each mask token (its first choice); columns: every token of the text, "
                        "[CLS] and [SEP] included. ALTI rolls each layer's contributions out over the encoder, so a "
                        "row sums to 1.")
sections.download(result)
