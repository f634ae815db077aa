"""Attribution with a translation model open: what each source token and each target-prefix token contributed to
every output token, by several methods side by side, and a deletion check of which explanation is faithful."""

import streamlit as st

from app import sessions, state, texts, tracing, widgets
from app.page_settings import ATTRIBUTION as own
from app.views.attribution import attribution_sections as sections
from viz_model.attribution import METHODS
from viz_model.attribution.faithfulness import DEFAULT_KS, summarise
from viz_model.plot import attribution_figures

session = sessions.require_session()
sections.heading("translation (teacher-forced on it).")
trace = tracing.trace_or_stop(session)
chosen, steps, tolerance = sections.pick_methods(sections.CHOICES)
computed = tuple(m for m in METHODS if m in {*chosen, "alti", "attention"})  # the share chart needs ALTI+
ranked = sections.ranked_of(chosen)
try:
    with st.spinner("Computing the attributions…"):
        result = session.attribution(trace, computed, steps, tolerance=tolerance)
except ValueError as err:
    widgets.input_problem(err, sections.CANNOT)
    st.stop()

# --- source or prefix ----------------------------------------------------------------------------------------------
if result.alti is not None:
    sections.share_section(result, "From the source, or from the translation so far?",
                           attribution_figures.share_figure(result),
                           ("the source", "the target prefix (the decoder's earlier outputs)"),
                           ("source_share", "prefix_share"))

# --- one output token, every method -----------------------------------------------------------------------------
output = sections.pick_output(result)
fig = sections.methods_chart(result, output, ranked, "source")
sections.methods_export_and_gap(fig, result, output, ranked)

with st.expander("Contrastive: why this word and not another?"):
    own.foil.init()
    state.bound(st.text_input, "…and not (one piece of the target vocabulary)", own.foil, max_chars=40,
                placeholder="e.g. Katze")
    foil_text = own.foil.get().strip()
    if foil_text:
        pieces = session.model.tokenizer.encode_target(foil_text)
        if len(pieces) != 1:
            st.error(texts.md_escape(f"“{foil_text}” is {len(pieces)} pieces "
                                      f"({' '.join(session.model.tokenizer.pieces(pieces))}); name a single piece, "
                                      "such as one of the alternatives in the steps table."))
        elif pieces[0] == result.output_ids[output]:
            st.warning(texts.md_escape(f"“{foil_text}” is the output token itself "
                                       f"({result.output_tokens[output]}): log p(y) − log p(y) is 0 for every "
                                       "input token. Name another piece, such as one of the alternatives in the "
                                       "steps table."))
        else:
            contrast_methods = tuple(m for m in ("saliency", "input_x_gradient", "integrated_gradients")
                                     if m in chosen) or ("input_x_gradient",)
            with st.spinner("Computing the contrastive attributions…"):
                contrast = session.attribution(trace, contrast_methods, steps, pieces[0], tolerance)
            fig = attribution_figures.methods_figure(contrast, output, contrast_methods)
            widgets.chart(fig, "contrastive", key="at_contrast_chart")
            st.caption(f"Scores of log p({result.output_tokens[output]}) − log p({contrast.foil}) at output "
                       f"{output}: the source tokens that made this word more likely than the foil.")

# --- the full matrix ------------------------------------------------------------------------------------------------
sections.matrix_section(ranked, lambda method: attribution_figures.contribution_figure(result, method),
                        "ALTI+ and the gradient methods also score the target prefix (right of the line); "
                        "attention-based methods score the source only.")

# --- faithfulness ------------------------------------------------------------------------------------------------
sections.faithfulness_heading()
if st.button("Check by deleting tokens", icon=":material/science:", key="at_check"):
    own.checked.set((tuple(trace.source_ids), tuple(trace.output_ids)))
if own.checked.get() == (tuple(trace.source_ids), tuple(trace.output_ids)):
    with st.spinner("Deleting tokens…"):
        deletions = session.deletions(trace, computed, ranked, DEFAULT_KS, steps, tolerance)
    fig = attribution_figures.deletion_figure(deletions)
    widgets.chart(fig, "faithfulness", key="at_deletion_chart")
    table = summarise(deletions)
    table["method"] = table["method"].map(attribution_figures.method_label)
    st.dataframe(table, hide_index=True, width="stretch")
    widgets.exports(fig, "faithfulness", "at_deletion_fig", csv=lambda: deletions)

sections.download(result)
