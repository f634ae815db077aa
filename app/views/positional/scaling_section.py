"""The Positional page's length experiment, live with RoPE's scalings: the loss by position past the trained length
as the model was loaded and with linear, dynamic NTK, YaRN and llama3 scaling switched on at a chosen factor (each in
a copy of the model; the loaded one is never changed)."""

from __future__ import annotations

import warnings

import streamlit as st

from app import widgets
from app.page_settings import POSITIONAL_ENCODING as own
from app.sessions import Session
from app.texts import count
from viz_model.lessons import position_length
from viz_model.lessons.position_parts import LessonError
from viz_model.lessons.position_rope import trained_length
from viz_model.lessons.position_scaling import AS_LOADED, MAX_FACTOR, SCALINGS, losses_by_scaling
from viz_model.plot import long_context_figures

NAMES = {"linear": "linear", "dynamic": "dynamic NTK", "yarn": "YaRN", "llama3": "llama3"}


def scaling_section(session: Session) -> None:
    """The scalings' form (which, the factor, Run), a progress bar, and the last run's curves and table."""
    model = session.model
    st.subheader("With RoPE's scalings switched on")
    if model.config.positional != "rope":
        st.info(f"This model has {model.config.positional} positions, not rotary ones: the scalings stretch RoPE's "
                "frequencies, so this part runs on a RoPE model (the shipped language model, Llama, Qwen, ...).")
        return
    trained = trained_length(model.config)
    st.caption(f"Each scaling applied at the factor to this model's own frequencies (base {model.config.rope_base:g}, "
               f"trained length {trained}), in a copy of the model: linear divides every frequency, dynamic NTK grows "
               "the base with the length a pass reaches, YaRN and llama3 stretch the slow pairs and keep the fast "
               "ones. The same text and tokens as above.")
    with st.form("pe_lm_scaling_form"):
        left, right = st.columns([2, 1])
        own.lm_scalings.init()
        left.multiselect("Scalings", list(SCALINGS), key=own.lm_scalings.key, format_func=NAMES.get)
        own.lm_factor.init()
        right.number_input("Factor", 1.0, MAX_FACTOR, step=1.0, key=own.lm_factor.key,
                           help="How far each scaling stretches: a factor of 4 aims at 4× the trained length.")
        submitted = st.form_submit_button("Measure with the scalings", icon=":material/play_arrow:", type="primary")
    tokens = int(own.lm_tokens.get())
    if submitted:
        ids = position_length.text_ids(model)
        chosen = [s for s in SCALINGS if s in own.lm_scalings.get()]
        bar = st.progress(0.0, text="Reading the text with each scaling…")
        try:
            with warnings.catch_warnings():  # the loss's own line says past the trained length
                warnings.simplefilter("ignore")
                runs = losses_by_scaling(model, ids, tokens, float(own.lm_factor.get()), chosen,
                                         progress=lambda done, total: bar.progress(done / total,
                                                                                   text=f"Pass {done} of {total}…"))
        except LessonError as err:
            bar.empty()
            own.lm_scaled.set(None)
            st.error(f"The scalings cannot be measured: {err}.")
            return
        bar.empty()
        own.lm_scaled.set((session.name, tokens, float(own.lm_factor.get()), runs))
    kept = own.lm_scaled.get()
    if kept is None or kept[0] != session.name:
        st.info("Press Measure with the scalings: one pass over the text for the model as loaded and one for each "
                "scaling.")
        return
    _, tokens, factor, runs = kept
    named = {(name if name == AS_LOADED else f"{NAMES[name]} × {factor:g}"): run for name, run in runs.items()}
    fig = long_context_figures.scaling_figure(named, int(own.lm_window.get()),
                                              {f"trained length {trained}": trained} if trained < tokens else {})
    widgets.chart(fig, "rope-scalings-by-position", key="pe_lm_scaling_chart")
    widgets.exports(fig, "rope-scalings-by-position", "pe_lm_scaling")
    rows = []
    for name, run in named.items():
        beyond = run.losses[trained:]
        rows.append({"run": name, f"mean loss within {trained}": round(float(run.losses[:trained].mean()), 3),
                     f"mean loss past {trained}": round(float(beyond.mean()), 3) if len(beyond) else None})
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption(f"{count(tokens, 'token')} of the text; the running mean is the one set above. A scaling trades "
               "some loss within the trained length for less past it; on a model never trained with one the gain "
               "may be small.")
