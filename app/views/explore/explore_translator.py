"""Translate & explore (home) with a translation model open: the sentence, its translation, then the attention views
(`explore_views`)."""

import streamlit as st

from app import sessions, state, tracing, widgets
from app.views.explore import explore_parts, explore_views
from viz_model.nn import kinds
from viz_model.trace import AttentionTrace

PARTS = explore_parts.KindParts(
    attention_kinds=list(kinds.KIND_LABELS), say_kind_change=True,
    head_label=explore_parts.head_label, short_head_label=explore_parts.short_head_label, value_measures=True,
    mark_map=lambda fig, trace, layer: None, heatmap_note=lambda trace, layer, level: None,
    mark_model_view=lambda fig, trace, kind, aggregate: None, model_view_note=lambda trace: "",
    groups=lambda trace: None, head_view_note=lambda trace, layer: None)


def panel(trace: AttentionTrace) -> None:
    """The input's warnings, the translation, the link and downloads, the decoding steps."""
    widgets.input_warnings(session, trace.source_text)
    widgets.translation_panel(trace)
    explore_views.link_and_downloads(trace)
    widgets.steps_table(trace)


session = sessions.require_session()
st.title("Translate & explore")
st.caption("Type a sentence: see every attention head of every layer of the Transformer that translates it.")
state.show_url_problems()
widgets.domain_notice(session.model)
explore_views.page(session, lambda: widgets.sentence_form(session), lambda: tracing.current_trace(session), panel,
                   lambda trace: PARTS)
