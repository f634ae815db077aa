"""Head roles: per-head attention statistics over a corpus as layer x head maps, a sortable table, and the role of
each head with example sentences (the model directory's precomputed table, or computed live over typed sentences).
With a translation model open (a language model's page: `head_roles_lm`)."""

import pandas as pd
import streamlit as st

from app import analyze_pages, sessions, state, texts, widgets
from app.page_settings import HEAD_ROLES as own
from viz_model.analysis import store
from viz_model.analysis.ablation import layer_counts
from viz_model.analysis.head_stats import ROLE_RULES, SHARE_STATISTICS, STATISTICS, role_summary
from viz_model.plot import analysis_figures

STAT_HELP = {
    "entropy": "Entropy of each query's weights, in nats (0 = all weight on one key).",
    "entropy_ratio": "Entropy divided by its maximum for the keys the query may see (1 = uniform, broad).",
    "same": "Weight a token puts on itself (self-attention only).",
    "previous": "Weight a token puts on the token before it (self-attention only).",
    "next": "Weight a token puts on the token after it (encoder only: the decoder cannot see ahead).",
    "diagonal": "Weight within one key of the proportional diagonal (for cross-attention: a monotone alignment).",
    "distance": "Weighted mean distance between the query and the keys it attends to (from the diagonal).",
    "delimiter": "Weight on the special tokens <s> and </s>.",
    "punctuation": "Weight on punctuation tokens.",
}
SOURCES = {"stored": "Precomputed table of this model", "live": "Computed over my sentences"}

session = sessions.require_session()
config = session.model.config
layers, heads = layer_counts(config), config.heads


def submit_sentences() -> None:
    own.text.set(own.text_box.get(""))


st.title("Head roles")
st.caption("What does each head do? Statistics of every head's attention, averaged over many sentences, and a role "
           "named by transparent rules (a head that puts most of its weight on the previous token is "
           "“positional: previous”).")
stored, problem = analyze_pages.stored_table(session, "stats")
if problem is not None:
    st.error(texts.md_escape(f"The precomputed table cannot be used: {problem}"))
elif stored is None:
    st.info(f"This model directory has no precomputed statistics ({store.HEAD_STATS_FILE}): compute them below over "
            "your own sentences, or over a whole corpus with `viz-model analyze --src FILE --out "
            f"MODEL_DIR/{store.HEAD_STATS_FILE}`.")
sources = ["stored", "live"] if stored is not None else ["live"]
state.clamp_choice(own.source, sources, sources[0], "Data source")
state.bound(st.radio, "Statistics from", own.source, sources, horizontal=True, format_func=SOURCES.get)

if own.source.get() == "live":
    own.text.init()
    own.text_box.init(own.text.get())
    with st.form("hr_form", border=False):
        st.text_area(f"Sentences ({session.model.languages.source_name}, one per line, at most "
                     f"{analyze_pages.MAX_LIVE_SENTENCES})", key=own.text_box.key,
                     height=160)
        st.form_submit_button("Analyze these sentences", on_click=submit_sentences, icon=":material/analytics:")
    try:
        sentences = analyze_pages.parse_sentences(own.text.get())
        with st.spinner(f"Translating and analysing {len(sentences)} sentences…"):
            analysis = analyze_pages.compute_head_stats(session.ref.stored, tuple(sentences))
    except ValueError as err:
        widgets.input_problem(err, "These sentences cannot be analysed: ")
        st.stop()
    table, examples = analysis.heads, analysis.sources
    st.caption(f"{len(sentences)} sentences, translated greedily; blank lines are skipped (sentence numbers count "
               "the others).")
else:
    table, examples = stored, analyze_pages.stored_sentences(session)
    count = table["sentences"].max() if "sentences" in table.columns else None
    st.caption(f"From {store.HEAD_STATS_FILE}" + (f" ({int(count):,} sentences)." if pd.notna(count) else "."))

# --- one statistic as layer x head maps --------------------------------------------------------------------------
state.clamp_choice(own.statistic, list(STATISTICS), "entropy", "Statistic")
state.bound(st.selectbox, "Statistic", own.statistic, list(STATISTICS), format_func=lambda s: s.replace("_", " "))
stat = own.statistic.get()
fig = analysis_figures.head_grid(analysis_figures.table_grid(table, stat, layers, heads),
                                 f"{stat.replace('_', ' ')} of every head", stat, unit=stat in SHARE_STATISTICS)
widgets.chart(fig, f"head-{stat}", key="hr_stat_chart")
st.caption(STAT_HELP[stat] + " Blank cells: the statistic is not defined for that kind of attention.")
widgets.exports(fig, f"head-{stat}", "hr_stat", csv=lambda: analyze_pages.display_heads(table))

st.subheader("Every head")
st.caption("Layers and heads count from 1. Click a column header to sort.")
st.dataframe(analyze_pages.display_heads(table), hide_index=True, width="stretch")

# --- roles -------------------------------------------------------------------------------------------------------
st.subheader("Roles")
st.caption("A head takes the first role whose statistic reaches its threshold: "
           + "; ".join(f"{r.role}: {r.statistic.replace('_', ' ')} ≥ {r.threshold:g}" for r in ROLE_RULES)
           + "; otherwise “other”.")
fig = analysis_figures.role_grid(table, layers, heads, "The role of every head")
widgets.chart(fig, "head-roles", key="hr_role_chart")
widgets.exports(fig, "head-roles", "hr_roles")
usable = examples if examples is not None and int(table["example_sentence"].max()) < len(examples) else None
if usable is None:
    st.caption(f"Example sentences are shown by number: put the analysed sentences, one per line, in "
               f"{store.HEAD_STATS_SENTENCES_FILE} to see them.")
for row in role_summary(table, usable).itertuples():
    group = table[table["role"] == row.role].sort_values("role_score", ascending=False, kind="stable")
    with st.expander(texts.md_escape(f"{row.role}: {row.heads} heads")):
        st.markdown(texts.md_escape(", ".join(analyze_pages.head_label((r.kind, r.layer, r.head))
                                               for r in group.itertuples())))
        for index in list(dict.fromkeys(i for i in group["example_sentence"] if i >= 0))[:3]:
            text = usable[index] if usable is not None else ""
            widgets.show_text(f"Example: sentence {index + 1}" + ("" if usable is not None else " of the corpus"),
                             text or f"(sentence {index + 1})")
