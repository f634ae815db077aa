"""Ablation with a translation model open: switch attention heads off for the current sentence and see what changes
(translation, token diff, log-probability), and how much each head matters over a corpus (the model directory's
importance table)."""

import streamlit as st

from app import analyze_pages, sessions, tracing
from app.views.ablation import head_switches
from viz_model.analysis.ablation import layer_counts

OUTPUT = "translation"

session = sessions.require_session()
head_switches.heading(OUTPUT, "translate the sentence again")
trace = tracing.trace_or_stop(session)
if trace.settings.get("forced"):
    st.info("The forced target is not used here: the ablation compares the model's own translations.")
chosen = head_switches.pick_heads(session.model.config, ("cross", layer_counts(session.model.config)["cross"] - 1, 0))
result = head_switches.ablated(chosen, "Translating",
                               lambda: analyze_pages.ablate(session, trace.source_text, tuple(chosen)))
if result is not None:
    head_switches.comparison(result, chosen, OUTPUT)
head_switches.importance(session, chosen, OUTPUT)
