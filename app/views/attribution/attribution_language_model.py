"""Attribution with a language model open: what each prompt token and each earlier continuation token contributed to
every token of the continuation (greedy, or a forced one), by several methods side by side."""

import streamlit as st

from app import completion, sessions, state, widgets
from app.page_settings import ATTRIBUTION as own
from app.page_settings import EXPLORE
from app.shared_settings import SHARED
from app.views.attribution import attribution_lm
from app.views.attribution import attribution_sections as sections
from viz_model.attribution import METHODS

session = sessions.require_session()
sections.heading("continuation: each of its tokens from the prompt and the continuation's earlier tokens "
                 "(teacher-forced on it, as inseq does for decoder-only models).")
completion.prompt_form()
trace = completion.current_completion(session)
if trace is None:
    st.stop()
own.target.init()
state.bound(st.text_input, "Forced continuation (optional: attribute this text in place of the model's own)",
            own.target, max_chars=200, placeholder="e.g. in the park",
            help="Its tokens as they follow the prompt (a leading space counts); empty: the greedy continuation "
                 "above.")
if EXPLORE.chat.get():
    st.info("Attribution reads the prompt as plain text: the chat template is not applied here.")

chosen, steps, tolerance = sections.pick_methods(attribution_lm.choices(sections.CHOICES))
computed = tuple(m for m in METHODS if m in {*chosen, "alti"})  # the share chart needs ALTI+
reading = attribution_lm.READINGS[trace.reading("decoder")]  # by rows: maps on demand, some methods left out
try:
    computed = reading.runs(session.model, SHARED.sentence.get(""), own.target.get(),
                            len(trace.target_tokens) - completion.prompt_length(trace), computed, steps)
    chosen = [m for m in chosen if m in computed]
    ranked = sections.ranked_of(chosen)
    if not ranked:
        st.info("None of the methods picked runs on a prompt this long: pick value-weighted attention.")
        st.stop()
    with st.spinner("Computing the attributions…"):
        forced = own.target.get() if own.target.get().strip() else ""
        p = completion.prompt_length(trace)
        traced = None if forced or EXPLORE.chat.get() else (tuple(trace.target_ids[:p]), tuple(trace.target_ids[p:]))
        result = attribution_lm.continuation_attribution(
            session.ref.stored, SHARED.sentence.get(""), forced, len(trace.target_tokens) - p, computed, steps,
            tolerance, reading.maps, traced)
except ValueError as err:
    widgets.input_problem(err, sections.CANNOT)
    st.stop()
ranked = sections.computed_of(result, ranked)

# --- prompt or continuation --------------------------------------------------------------------------------------
if result.alti is not None:
    sections.share_section(result, "From the prompt, or from the continuation so far?",
                           attribution_lm.share_figure(result), ("the prompt", "the continuation's earlier tokens"),
                           ("prompt_share", "continuation_share"))

# --- one output token, every method -----------------------------------------------------------------------------
output = sections.pick_output(result)
fig = reading.methods(result, output, ranked)
sections.methods_export_and_gap(fig, result, output, ranked)
st.caption(attribution_lm.NO_FOIL)

# --- the full matrix ------------------------------------------------------------------------------------------------
sections.matrix_section(ranked, lambda method: reading.matrix(result, method),
                        "ALTI+ and the gradient methods also score the continuation's earlier tokens (right of the "
                        "line); value-weighted attention scores the prompt only.")

# --- faithfulness ------------------------------------------------------------------------------------------------
sections.faithfulness_heading()
st.info(attribution_lm.NO_DELETION)

sections.download(result)
