"""Head roles with a language model open: the roles' scores on the prompt, a small English corpus or repeated random
tokens (cached per model)."""

from __future__ import annotations

import warnings

import pandas as pd
import streamlit as st

from app import analyze_pages, completion, sessions, state, texts, widgets
from app.page_settings import HEAD_ROLES as own
from app.shared_settings import SHARED
from app.views.head_roles import detector_section
from viz_model.analysis import ablation, lm_head_roles
from viz_model.analysis.lm_head_roles import REPEATED_COPIES, REPEATED_LENGTH, REPEATED_SAMPLES, ROLE_SCORES
from viz_model.plot import analysis_figures

SOURCES = {"repeated": "Repeated random tokens", "prompt": "My prompt", "corpus": "A small English corpus"}
SCORE_LABELS = {"previous_token": "previous token", "induction": "induction", "duplicate_token": "duplicate token",
                "first_token": "first token (sink)", "entropy": "entropy"}
SCORE_HELP = {
    "previous_token": "Weight each token puts on the token just before it (queries 2 onwards).",
    "induction": "Weight a token puts on the token that followed an earlier copy of itself ([A][B] … [A] → [B]), "
                 "over the tokens that have an earlier copy: Olsson et al.'s prefix matching.",
    "duplicate_token": "Weight a token puts on earlier copies of itself, over the tokens that have one.",
    "first_token": "Weight on the first token (queries 2 onwards): the attention sink's share.",
    "entropy": "Entropy of each query's weights in nats, queries 2 onwards (0 = all weight on one key).",
}
MIN_REPEATED_LENGTH = 4


def repeated_sizes(max_positions: int) -> tuple[int, int]:
    """Olsson et al.'s 25 random tokens x4 where the model's positions hold them (and a start token), else fewer."""
    for copies in (REPEATED_COPIES, 2):
        length = min(REPEATED_LENGTH, (max_positions - 1) // copies)
        if length >= MIN_REPEATED_LENGTH:
            return length, copies
    raise ValueError(f"this model has {max_positions} positions: too few for two copies of "
                     f"{MIN_REPEATED_LENGTH} random tokens")


@st.cache_data(show_spinner=False, max_entries=8)
def compute_roles(ref: sessions.ModelRef, source: str, prompt: str | list[dict[str, str]]) -> tuple[pd.DataFrame, str]:
    """The roles' table of `source` ("prompt", "corpus" or "repeated"; `prompt`: text or a chat turn) and a line
    saying what it was measured on."""
    model = sessions.load_model(ref)
    if source == "prompt":
        tokens = texts.count(len(model.encode(prompt)), "token")
        return lm_head_roles.prompt_roles(model, prompt), f"the prompt ({tokens})"
    if source == "corpus":
        sentences, where = lm_head_roles.english_corpus()
        return lm_head_roles.corpus_roles(model, sentences), f"{len(sentences)} sentences: {where}"
    length, copies = repeated_sizes(model.config.max_positions)
    table = lm_head_roles.repeated_roles(model, length, copies, REPEATED_SAMPLES)
    return table, (f"{REPEATED_SAMPLES} sequences of {length} random tokens repeated {copies} times (seeds 0 to "
                   f"{REPEATED_SAMPLES - 1}), a start token first")


def past_trained_length(session: sessions.Session, prompt: str | list[dict[str, str]]) -> None:
    """The library's warning where the prompt (text or chat turn) runs past the model's trained length (its refusals
    are said where the scores are computed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            session.model.encode(prompt)
        except ValueError:
            return
    for message in dict.fromkeys(str(w.message) for w in caught if "positions are past" in str(w.message)):
        st.warning(f"{message[0].upper()}{message[1:]}.")


def page(session: sessions.Session) -> None:
    """The Head roles page for a language model."""
    config = session.model.config
    st.title("Head roles")
    st.caption("What does each head of this language model do? Five scores per layer and head, measured on repeated "
               "random tokens (as Olsson et al. found induction heads), on your prompt or on a small English corpus.")
    state.clamp_choice(own.lm_source, list(SOURCES), "repeated", "Measured on")
    state.bound(st.radio, "Measured on", own.lm_source, list(SOURCES), horizontal=True, format_func=SOURCES.get)
    source, prompt = own.lm_source.get(), SHARED.sentence.get("")
    asked = completion.asked_turn(prompt)  # Complete & explore's turn
    if source == "prompt":
        if not prompt.strip():
            st.info("Type a prompt on Complete & explore to score the heads on it.")
            return
        widgets.show_text("The prompt of Complete & explore", prompt)
        past_trained_length(session, asked)
    try:
        with st.spinner("Scoring every head…"):
            table, measured = compute_roles(session.ref.stored, source, asked if source == "prompt" else "")
    except ValueError as err:
        widgets.input_problem(err, "The heads cannot be scored on this: ")
        return
    st.caption(f"Measured on {measured}.")
    table = table.assign(kind="decoder")
    state.clamp_choice(own.lm_score, list(ROLE_SCORES), "induction", "Score")
    state.bound(st.selectbox, "Score", own.lm_score, list(ROLE_SCORES), format_func=SCORE_LABELS.get)
    score = own.lm_score.get()
    layers = ablation.layer_counts(config)
    fig = analysis_figures.head_grid(analysis_figures.table_grid(table, score, layers, config.heads),
                                     f"{SCORE_LABELS[score]} of every head", SCORE_LABELS[score],
                                     unit=score in lm_head_roles.SHARE_SCORES)
    widgets.chart(fig, f"head-{score}", key="hr_lm_chart")
    st.caption(SCORE_HELP[score] + " Blank cells: no row of the text defines the score (no token repeats).")
    widgets.exports(fig, f"head-{score}", "hr_lm", csv=lambda: analyze_pages.display_heads(table))
    st.subheader("The strongest heads")
    ranked = table.dropna(subset=[score]).sort_values(score, ascending=score == "entropy", kind="stable")
    for row in ranked.head(3).itertuples():
        st.markdown(texts.md_escape(f"{analyze_pages.head_label(('decoder', row.layer, row.head))}: "
                                    f"{SCORE_LABELS[score]} {getattr(row, score):.3f}"))
    st.subheader("Every head")
    st.caption("Layers and heads count from 1. Click a column header to sort.")
    st.dataframe(analyze_pages.display_heads(table.drop(columns="kind")), hide_index=True, width="stretch")
    detector_section.section(session)
