"""Ablation with an encoder open: switch attention heads off and see the fill-mask predictions change (the text
filled in, each mask's top tokens before and after, the log-probability of the intact choices)."""

import streamlit as st

from app import fill_in_changes, sessions
from app.views.ablation import head_switches
from viz_model.analysis import ablation
from viz_model.analysis.ablation import AblationResult, Head, layer_counts

OUTPUT = "filled-in text"


@st.cache_data(show_spinner=False, max_entries=8)
def compute_ablation(ref: sessions.ModelRef, text: str, heads: tuple[Head, ...]) -> AblationResult:
    """`ablate` of the loaded encoder: the text's masks filled with and without `heads`."""
    return ablation.ablate(sessions.load_model(ref), text, heads)


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
