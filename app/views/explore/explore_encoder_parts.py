"""What Fill in the blank & explore draws its own way for an encoder: encoder self-attention only, plain head labels,
the predictions at the masks under every view, and where a pair's second sentence starts (a line on the maps; the
head view draws one sentence's attention to the other)."""

from __future__ import annotations

import streamlit as st

from app import fill_in
from app.sessions import Session
from app.views.explore.explore_views import KindParts, head_label, short_head_label
from viz_model.trace import AttentionTrace


def parts(session: Session, trace: AttentionTrace) -> KindParts:
    """The encoder's parts for `trace` (its pair's boundary read through the session's model)."""
    start = fill_in.pair_start(session, trace)
    filled = fill_in.predictions_line(trace)
    filled = f" Filled in at {filled}." if filled else ""

    def pair_note(*_: object) -> None:
        if filled:
            st.caption(filled.strip())
        if start is not None:
            st.caption(f"A pair: sentence A is tokens 0 to {start - 1}, sentence B tokens {start} to "
                       f"{len(trace.source_tokens) - 1} (token type 1 where the model reads token types); the green "
                       "dotted line marks where B starts.")

    def head_view_note(*_: object) -> None:
        if filled:
            st.caption(filled.strip())
        if start is not None:
            st.caption(f"A pair: sentence B starts at token {start}. Pick the sentences above to draw only one "
                       "sentence's attention to the other (sentence A → sentence B, as bertviz draws it).")

    return KindParts(
        attention_kinds=["encoder"], say_kind_change=False,  # an encoder-only model has no decoder
        head_label=head_label, short_head_label=short_head_label, value_measures=False,
        mark_map=lambda fig, trace, layer: fill_in.mark_pair(fig, start), heatmap_note=pair_note,
        mark_model_view=lambda fig, trace, kind, aggregate: None, model_view_note=lambda trace: filled,
        groups=lambda trace: None, head_view_note=head_view_note, pair_start=lambda trace: start)
