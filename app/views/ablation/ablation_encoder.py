"""Ablation with an encoder open: switch attention heads off and see the fill-mask predictions change (the text
filled in, each mask's top tokens before and after, the log-probability of the intact choices), and how much each
head alone matters to this text's predictions (a grid to click)."""

import pandas as pd
import streamlit as st

from app import analyze_pages, fill_in_changes, sessions, widgets
from app.views.ablation import head_switches
from viz_model.analysis import ablation, fill_mask_ablation
from viz_model.analysis.ablation import AblationResult, Head, layer_counts
from viz_model.plot import analysis_figures

OUTPUT = "filled-in text"


@st.cache_data(show_spinner=False, max_entries=8)
def compute_ablation(ref: sessions.ModelRef, text: str, heads: tuple[Head, ...]) -> AblationResult:
    """`ablate` of the loaded encoder: the text's masks filled with and without `heads`."""
    return ablation.ablate(sessions.load_model(ref), text, heads)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_importance(ref: sessions.ModelRef, text: str) -> pd.DataFrame:
    """`text_importance` of the loaded encoder: each head switched off alone."""
    return fill_mask_ablation.text_importance(sessions.load_model(ref), text)


def importance_section(text: str, chosen: list[Head]) -> None:
    """Each head alone switched off: the change of log P(the intact first choices), a grid to click."""
    st.subheader("Each head alone, on this text")
    config = session.model.config
    with st.spinner("Switching each head off in turn…"):
        table = compute_importance(session.ref.stored, text)
    fig = analysis_figures.head_grid(analysis_figures.table_grid(table, "change", layer_counts(config), config.heads),
                                     "Change of log P(the intact first choices) with each head alone off",
                                     "change (nats)", "RdBu", selected=chosen, zmid=0.0)
    head_switches.clickable_grid(fig, "head-importance-text", "abl_enc_importance")
    st.caption("One pass per head over this text. Red heads helped: without them the model's own first choices at "
               "the masks become less likely; blue ones even hurt. Click a head to switch it off above.")
    widgets.exports(fig, "head-importance-text", "abl_enc_importance_export",
                    csv=lambda: analyze_pages.display_heads(table))


session = sessions.require_session()
head_switches.heading(OUTPUT, "fill in the masks again", " At each mask: its top tokens with and without them.")
trace = fill_in_changes.masked_reading_or_stop(session, "Ablation")
chosen = head_switches.pick_heads(session.model.config,
                                  ("encoder", layer_counts(session.model.config)["encoder"] - 1, 0))
result = head_switches.ablated(chosen, "Filling in", lambda: compute_ablation(
    session.ref.stored, trace.source_text, tuple(chosen)))
if result is not None:
    head_switches.comparison(result, chosen, OUTPUT)
    st.subheader("At each mask")
    fill_in_changes.changes_table(result.intact.settings["predictions"], result.ablated.settings["predictions"],
                                  f"with {head_switches.off_label(chosen)} off")
importance_section(trace.source_text, chosen)
