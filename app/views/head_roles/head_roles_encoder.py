"""Head roles with an encoder open, "What does BERT look at?" (Clark et al., 2019): each head's attention on [CLS], on
[SEP], on punctuation, on the previous and the next token, and its breadth, measured on the text or a small English
corpus (cached per model), with the paper's findings named where this model shows them."""

import pandas as pd
import streamlit as st

from app import analyze_pages, fill_in, sessions, state, texts, widgets
from app.page_settings import HEAD_ROLES as own
from viz_model.analysis import ablation, encoder_head_roles, lm_head_roles
from viz_model.analysis.encoder_head_roles import BROAD_THRESHOLD, ROLE_SCORES, ROLE_THRESHOLD, SHARE_SCORES
from viz_model.plot import analysis_figures

SOURCES = {"corpus": "A small English corpus", "text": "My text"}
SCORE_LABELS = {"cls": "on [CLS]", "sep": "on [SEP]", "punctuation": "on punctuation",
                "previous_token": "on the previous token", "next_token": "on the next token",
                "entropy": "entropy (nats)", "breadth": "breadth (entropy / log n)"}
SCORE_HELP = {
    "cls": "Weight on the leading special token, averaged over every query.",
    "sep": "Weight on the closing special token (each of a pair's), averaged over every query.",
    "punctuation": "Weight on the tokens that are punctuation alone (periods, commas), averaged over every query.",
    "previous_token": "Weight each token puts on the token just before it (queries 2 onwards).",
    "next_token": "Weight each token puts on the token just after it (every query but the last).",
    "entropy": "Entropy of each query's weights in nats, averaged (0 = all weight on one key).",
    "breadth": "Entropy over its largest value, log n: 1 when a head spreads its weight evenly over every token.",
}


@st.cache_data(show_spinner=False, max_entries=8)
def compute_roles(ref: sessions.ModelRef, source: str, text: str, pair: str | None) -> tuple[pd.DataFrame, str]:
    """The roles' table of `source` ("text" or "corpus") and a line saying what it was measured on."""
    model = sessions.load_model(ref)
    if source == "text":
        tokens = texts.count(len(model.encode(text, pair)), "token")
        return encoder_head_roles.text_roles(model, text, pair), f"the text ({tokens})"
    sentences, where = lm_head_roles.english_corpus()
    table = encoder_head_roles.corpus_roles(model, sentences)
    read = int(table["sequences"].max())
    left = "" if read == len(sentences) else f" of {len(sentences)} (the others are longer than its positions)"
    return table, f"{read}{left} sentences: {where}"


def findings_section(table: pd.DataFrame) -> None:
    """The paper's findings this model shows, strongest first per finding."""
    st.subheader("What this model's heads look at")
    found = encoder_head_roles.findings(table)
    st.caption(f"Named where a head puts at least {ROLE_THRESHOLD:.0%} of its weight on [SEP], [CLS], punctuation, "
               f"the previous or the next token, or spreads it with at least {BROAD_THRESHOLD:.0%} of the uniform "
               "entropy. Clark et al. found all of these in BERT-base: [SEP] as a no-op in the middle layers, "
               "previous- and next-token heads, broad heads in the lowest layers.")
    if not found:
        st.info("No head of this model crosses these thresholds here.")
        return
    for finding in found[:12]:
        st.markdown(texts.md_escape(f"- {finding.text[0].upper()}{finding.text[1:]}."))
    if len(found) > 12:
        st.caption(f"And {len(found) - 12} more: sort the table below.")


def measured_on() -> str:
    """What the scores are measured on, picked ("corpus" or "text")."""
    state.clamp_choice(own.encoder_source, list(SOURCES), "corpus", "Measured on")
    state.bound(st.radio, "Measured on", own.encoder_source, list(SOURCES), horizontal=True, format_func=SOURCES.get)
    return own.encoder_source.get()


session = sessions.require_session()
config = session.model.config
st.title("Head roles")
st.caption("What does each head of this encoder look at? Seven scores per layer and head after Clark et al., \"What "
           "Does BERT Look At?\" (2019), measured on a small English corpus or on your text.")
source = measured_on()
text, pair = "", None
if source == "text":
    trace = fill_in.reading_or_stop(session)
    text, pair = trace.source_text, trace.settings.get("text_pair")
try:
    with st.spinner("Scoring every head…"):
        table, measured = compute_roles(session.ref.stored, source, text, pair)
except ValueError as err:
    widgets.input_problem(err, "The heads cannot be scored on this: ")
    st.stop()
st.caption(texts.md_escape(f"Measured on {measured}."))
findings_section(table)
table = table.assign(kind="encoder")
state.clamp_choice(own.encoder_score, list(ROLE_SCORES), "sep", "Score")
state.bound(st.selectbox, "Score", own.encoder_score, list(ROLE_SCORES), format_func=SCORE_LABELS.get)
score = own.encoder_score.get()
fig = analysis_figures.head_grid(
    analysis_figures.table_grid(table, score, ablation.layer_counts(config), config.heads),
    f"Attention {SCORE_LABELS[score]} of every head", SCORE_LABELS[score], unit=score in SHARE_SCORES)
widgets.chart(fig, f"head-{score}", key="hr_enc_chart")
st.caption(SCORE_HELP[score])
widgets.exports(fig, f"head-{score}", "hr_enc", csv=lambda: analyze_pages.display_heads(table))
st.subheader("Every head")
st.caption("Layers and heads count from 1. Click a column header to sort.")
st.dataframe(analyze_pages.display_heads(table.drop(columns="kind")), hide_index=True, width="stretch")
