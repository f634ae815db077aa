"""What Fill in the blank & explore draws its own way for an encoder: encoder self-attention only, plain head labels,
the predictions at the masks under every view, and where a pair's second sentence starts (a line on the maps; the
head view draws one sentence's attention to the other)."""

from __future__ import annotations

import streamlit as st

from app import fill_in, state
from app.page_settings import EXPLORE as own
from app.sessions import Session
from app.views.explore.explore_parts import KindParts, head_label, short_head_label
from viz_model.trace import AttentionTrace

SENTENCE_PAIRS = {"all": "All", "aa": "Sentence A → Sentence A", "bb": "Sentence B → Sentence B",
                  "ab": "Sentence A → Sentence B", "ba": "Sentence B → Sentence A"}  # bertviz's head view's choices


def sentence_windows(choice: str, start: int, n: int) -> tuple[slice | None, slice | None]:
    """The head view's (queries, keys) of a pair of `n` tokens whose sentence B starts at `start` for one of
    `SENTENCE_PAIRS` ("ab": sentence A's queries, sentence B's keys; "all": (None, None), every token)."""
    if choice == "all":
        return None, None
    sentences = {"a": slice(0, start), "b": slice(start, n)}
    return sentences[choice[0]], sentences[choice[1]]


def pair_windows(trace: AttentionTrace, start: int | None, window: slice | None
                 ) -> tuple[slice | None, slice | None]:
    """The head view's queries and keys: for a pair (B starting at `start`; not a long text's `window`), the
    sentences picked, one sentence's attention to the other as bertviz draws it; else `window` for both."""
    if start is None or window is not None:
        return window, None
    own.sentences.init()
    state.bound(st.radio, "Sentences", own.sentences, list(SENTENCE_PAIRS), horizontal=True,
                format_func=SENTENCE_PAIRS.get,
                help="Which sentence's tokens are the queries (left) and which the keys (right); each line keeps "
                     "its weight in the whole map's row.")
    return sentence_windows(own.sentences.get(), start, len(trace.source_tokens))


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
        groups=lambda trace: None, head_view_note=head_view_note,
        head_windows=lambda trace, window: pair_windows(trace, start, window))
