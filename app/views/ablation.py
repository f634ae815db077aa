"""Ablation: switch attention heads off for the current sentence and see what changes (translation, token diff,
log-probability), and how much each head matters over a corpus (the model directory's importance table). With a
language model: the prompt's continuation, and each next token's log-probability and the KL along the prompt."""

from functools import partial

import numpy as np
import streamlit as st

from app import analyze_pages, completion, lm_head_pages, sessions, state, texts, tracing, widgets
from app.page_settings import ABLATION as own
from app.page_settings import EXPLORE
from app.shared_settings import SHARED
from viz_model.analysis import store
from viz_model.analysis.ablation import all_heads, layer_counts
from viz_model.plot import analysis_figures

IMPORTANCE_COLUMNS = {"nll_rise": "NLL rise (nats per token)", "bleu_drop": "BLEU drop"}

session = sessions.require_session()
config = session.model.config
language_model = session.is_language_model
output = "continuation" if language_model else "translation"
layers, head_count = layer_counts(config), config.heads
everything = all_heads(config)


def toggle_head(chart_key: str) -> None:
    """A click on a head grid switches that head on or off; the grid is then redrawn without a selection."""
    point = state.selected_point(st.session_state.get(chart_key))
    if point is None or len(point) != 3:
        return
    head = (str(point[0]), int(point[1]), int(point[2]))
    chosen = list(own.heads.get())
    own.heads.set([h for h in chosen if h != head] if head in chosen else [*chosen, head])
    own.redraws.set(own.redraws.get() + 1)


def clickable_grid(fig, name: str, key: str) -> None:
    chart_key = f"{key}_{own.redraws.get()}"  # a new key after every click: the grid is drawn without a selection
    widgets.chart(fig, name, key=chart_key, on_select=partial(toggle_head, chart_key))


st.title("Ablation")
again = "continue the prompt again" if language_model else "translate the sentence again"
st.caption("Switch heads off (their output multiplied by 0, for this request only: the model every visitor shares "
           f"is not changed) and {again}: does the {output} change, and how much less likely does the original "
           f"{output} become?" + (" Along the prompt: how likely each next token is, with and without them."
                                  if language_model else ""))
if language_model:
    completion.prompt_form()
    if completion.current_completion(session) is None:
        st.stop()
else:
    trace = tracing.trace_or_stop(session)
    if trace.settings.get("forced"):
        st.info("The forced target is not used here: the ablation compares the model's own translations.")

# --- which heads -------------------------------------------------------------------------------------------------
default = ("decoder", layers["decoder"] - 1, 0) if language_model else ("cross", layers["cross"] - 1, 0)
own.heads.init([default])
kept = [tuple(h) for h in own.heads.get() if tuple(h) in everything]  # another model may be smaller, or have no
own.heads.set(kept if kept or not own.heads.get() else [default])  # cross heads: then its own default
state.bound(st.multiselect, "Heads to switch off", own.heads, everything, format_func=analyze_pages.head_label,
            placeholder="Pick heads, or click them in the grid below")
chosen = sorted(own.heads.get(), key=everything.index)
grid = {kind: np.zeros((count, head_count)) for kind, count in layers.items()}
fig = analysis_figures.head_grid(grid, f"Heads switched off: {len(chosen)} of {len(everything)} (click a head to add "
                                       "or remove it)", "switched off", [[0, "#f0f2f6"], [1, "#f0f2f6"]],
                                 selected=chosen, showscale=False)
clickable_grid(fig, "ablation-heads", "abl_grid")

# --- this sentence with and without them -------------------------------------------------------------------------
if not chosen:
    st.info("Pick at least one head to switch off.")
else:
    logits = None
    try:
        with st.spinner(f"{'Continuing' if language_model else 'Translating'} without {len(chosen)} heads…"):
            if language_model:
                prompt = completion.asked_turn(SHARED.sentence.get(""))  # the turn the prompt form asked for
                result, logits = lm_head_pages.compute_ablation(session.ref.stored, prompt, tuple(chosen),
                                                                int(EXPLORE.new_tokens.get()))
            else:
                result = analyze_pages.ablate(session, trace.source_text, tuple(chosen))
    except ValueError as err:
        widgets.input_problem(err, "This ablation cannot be run: ")
        result = None
    if result is not None:
        off = "1 head" if len(chosen) == 1 else f"{len(chosen)} heads"
        left, right = st.columns(2)
        with left, st.container(border=True):
            widgets.show_text(f"{output.capitalize()}, every head on", result.translation)
        with right, st.container(border=True):
            widgets.show_text(f"{output.capitalize()}, {off} off", result.ablated_translation)
        st.caption("Token diff (intact → heads off): :red-background[~~deleted~~] pieces are only in the intact "
                   f"{output}, :green-background[inserted] ones only in the ablated one.")
        st.markdown(analyze_pages.diff_markdown(result.diff))
        if result.changed:
            st.dataframe(analyze_pages.diff_table(result.diff), hide_index=True, width="stretch")
        else:
            st.success(f"The {output} did not change: these heads are not needed for this output.")
        a, b = st.columns(2)
        a.metric(f"log P(original {output}), every head on", f"{result.log_prob_intact:.3f}")
        b.metric(f"log P(original {output}), {off} off", f"{result.log_prob_ablated:.3f}",
                 delta=f"{result.log_prob_change:+.3f}",
                 help=f"The intact model's {output} scored by the model without these heads (teacher-forced); "
                      "the change below is negative when it became less likely.")
    if logits is not None:
        lm_head_pages.logit_change_section(logits, off)

# --- over a corpus -----------------------------------------------------------------------------------------------
st.subheader("Head importance over a corpus")
importance, problem = analyze_pages.stored_table(session, "importance")
if problem is not None:
    st.error(texts.md_escape(f"The importance table cannot be used: {problem}"))
elif importance is None:
    st.info(f"This model directory has no importance table ({store.HEAD_IMPORTANCE_FILE}). Write it with "
            "`viz-model importance --model MODEL_DIR --src FILE --tgt FILE --limit 500 --out "
            f"MODEL_DIR/{store.HEAD_IMPORTANCE_FILE}` (one teacher-forced pass over the corpus per head"
            + ("; --src holds prompts, --tgt their continuations)." if language_model else ")."))
else:
    columns = [c for c in IMPORTANCE_COLUMNS if c in importance.columns]
    state.clamp_choice(own.metric, columns, columns[0], "Measure")
    state.bound(st.radio, "Measure", own.metric, columns, horizontal=True, format_func=IMPORTANCE_COLUMNS.get)
    metric = own.metric.get()
    fig = analysis_figures.head_grid(analysis_figures.table_grid(importance, metric, layers, head_count),
                                     f"{IMPORTANCE_COLUMNS[metric]} when each head alone is switched off",
                                     IMPORTANCE_COLUMNS[metric], "RdBu_r", selected=chosen, zmid=0.0)
    clickable_grid(fig, f"head-importance-{metric}", "abl_importance")
    st.caption(f"From {store.HEAD_IMPORTANCE_FILE}. Red heads matter: without them the reference {output}s "
               "become less likely; blue ones even help when removed. Click a head to switch it off above.")
    widgets.exports(fig, f"head-importance-{metric}", "abl_importance_export",
                   csv=lambda: analyze_pages.display_heads(importance))
