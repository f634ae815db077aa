"""Head roles with a language model open: the head detector section (TransformerLens's ``head_detector``): a named
pattern or one the user draws as a query x key table, scored against every head on one sequence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app import analyze_pages, completion, sessions, state, texts, widgets
from app.page_settings import HEAD_ROLES as own
from app.shared_settings import SHARED
from viz_model.analysis import ablation, head_detectors, lm_head_roles
from viz_model.plot import analysis_figures

PATTERNS = {"duplicate_token": "duplicate token", "previous_token": "previous token", "induction": "induction",
            "drawn": "my pattern (draw it below)"}
TEXTS = {"repeated": "Random tokens repeated twice", "prompt": "My prompt"}
DETECTOR_LENGTH = 6  # random tokens a copy: a start token and two copies, small enough to draw a pattern over
MAX_DRAWN_TOKENS = 24  # a drawn pattern's table: at most this many rows and columns


@st.cache_data(show_spinner=False, max_entries=16)
def detector_ids(ref: sessions.ModelRef, source: str, prompt: str | list[dict[str, str]]) -> list[int]:
    """The ids the detectors read: one repeated random sequence (seed 0), or the prompt's."""
    model = sessions.load_model(ref)
    if source == "prompt":
        return model.encode(prompt)
    return lm_head_roles.repeated_sequences(model, DETECTOR_LENGTH, 2, samples=1)[0]


@st.cache_data(show_spinner=False, max_entries=16)
def compute_scores(ref: sessions.ModelRef, ids: tuple[int, ...], pattern: str | tuple[tuple[float, ...], ...],
                   exclude_bos: bool, exclude_current: bool) -> pd.DataFrame:
    """`head_detectors.detect_heads` of `pattern` (a name, or the drawn matrix's rows) on `ids`."""
    matrix = pattern if isinstance(pattern, str) else np.array(pattern)
    return head_detectors.detect_heads(sessions.load_model(ref), list(ids), matrix, exclude_bos=exclude_bos,
                                       exclude_current_token=exclude_current)


def position_labels(pieces: list[str]) -> list[str]:
    """Each position's label in the drawn table: its number from 1 and its token."""
    return [f"{i + 1} {piece}" for i, piece in enumerate(pieces)]


def drawn_pattern(pieces: list[str], ids: list[int]) -> np.ndarray | None:
    """The pattern the user draws in a query x key table (the previous-token pattern to start from); None, with one
    line, where it cannot be used."""
    n = len(ids)
    if n > MAX_DRAWN_TOKENS:
        st.info(f"The prompt has {n} tokens: draw a pattern on one of up to {MAX_DRAWN_TOKENS} tokens.")
        return None
    labels = position_labels(pieces)
    start = pd.DataFrame(head_detectors.previous_token_pattern(n), index=labels, columns=labels)
    st.caption("Rows are queries, columns keys; a causal model's query sees itself and the keys before it, so cells "
               "above the diagonal must stay 0. Put 1 (or any weight) where a head of this kind should look.")
    edited = st.data_editor(start, key=f"hr_det_drawn_{n}_{hash(tuple(ids))}", width="stretch")
    try:
        return head_detectors.check_pattern(edited.to_numpy(dtype=float, na_value=0.0), n)
    except ValueError as err:
        widgets.input_problem(err, "This pattern cannot be scored: ")
        return None


def section(session: sessions.Session) -> None:
    """The head detector section of the language model's Head roles page."""
    st.subheader("Head detectors")
    for setting in (own.detect, own.exclude_bos, own.exclude_current):
        setting.init()
    state.bound(st.toggle, "Score a pattern against every head (TransformerLens's head_detector)", own.detect)
    if not own.detect.get():
        return
    state.clamp_choice(own.detector, list(PATTERNS), "duplicate_token", "Pattern")
    state.bound(st.radio, "Pattern", own.detector, list(PATTERNS), horizontal=True, format_func=PATTERNS.get)
    state.clamp_choice(own.detector_text, list(TEXTS), "repeated", "Sequence")
    state.bound(st.radio, "Sequence", own.detector_text, list(TEXTS), horizontal=True, format_func=TEXTS.get)
    with st.container(horizontal=True):
        state.bound(st.checkbox, "Leave out the first token's weight (exclude_bos)", own.exclude_bos)
        state.bound(st.checkbox, "Leave out each token's weight on itself (exclude_current_token)",
                    own.exclude_current)
    source, prompt = own.detector_text.get(), SHARED.sentence.get("")
    if source == "prompt" and not prompt.strip():
        st.info("Type a prompt on Complete & explore to detect heads on it.")
        return
    try:
        ids = detector_ids(session.ref.stored, source, completion.asked_turn(prompt) if source == "prompt" else "")
    except ValueError as err:
        widgets.input_problem(err, "The heads cannot be scored on this: ")
        return
    pieces = session.model.pieces(ids)
    name = own.detector.get()
    pattern = drawn_pattern(pieces, ids) if name == "drawn" else head_detectors.named_pattern(name, ids)
    if pattern is None:
        return
    if not pattern.any():
        st.info(f"The {PATTERNS[name]} pattern is empty on this sequence (no token repeats): no head can score.")
        return
    key = name if name != "drawn" else tuple(map(tuple, pattern.tolist()))
    table = compute_scores(session.ref.stored, tuple(ids), key, own.exclude_bos.get(), own.exclude_current.get())
    label = f"{PATTERNS[name] if name != 'drawn' else 'my pattern'} detector"
    config = session.model.config
    table = table.assign(kind="decoder")
    fig = analysis_figures.head_grid(analysis_figures.table_grid(table, "score", ablation.layer_counts(config),
                                                                 config.heads), f"{label} of every head", label,
                                     unit=True)
    widgets.chart(fig, "head-detector", key="hr_det_chart")
    st.caption(f"Share of each head's weight on {texts.count(len(ids), 'token')} that falls inside the pattern "
               "(weighted by its cells), as head_detector scores it with error_measure='mul'.")
    widgets.exports(fig, "head-detector", "hr_det", csv=lambda: analyze_pages.display_heads(table))
    for row in table.dropna(subset=["score"]).sort_values("score", ascending=False, kind="stable").head(3).itertuples():
        st.markdown(texts.md_escape(f"{analyze_pages.head_label(('decoder', row.layer, row.head))}: "
                                    f"{label} {row.score:.3f}"))
