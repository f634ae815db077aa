"""The Attention sinks page's "Sink eviction, live": StreamingLLM's Table 1 on the open language model (perplexity of
a long text under a sliding key/value window with 0, 1, 2, 4 and 8 initial tokens kept, against the full context),
with a progress bar, a table and a bar chart; the paper's own figures beside them, marked as the paper's."""

from __future__ import annotations

import warnings

import streamlit as st

from app import widgets
from app.page_settings import SINKS as own
from app.sessions import Session
from app.texts import count
from viz_model.analysis.sink_eviction import KEPT, PAPER, sink_eviction
from viz_model.kinds.language_model import INPUT_POSITIONS
from viz_model.lessons.position_length import text_ids
from viz_model.lessons.position_text import LONG_TEXT, TITLE
from viz_model.plot import long_context_figures

RULES = {"cache": "within the cache (StreamingLLM's)", "text": "in the text (one masked pass)"}
MOST_TOKENS = 2048  # a token a pass after the window fills: about a second per hundred tokens on a laptop CPU


def run_form(session: Session) -> bool:
    """The text, its length and the window, and the Run button; a run's result kept in the page's session. False
    after the one line saying why a run could not go."""
    model = session.model
    with st.form("sk_evict_form"):
        st.text_area("Text (empty: the page's long text)", key=own.evict_text.key, height=100,
                     placeholder=f"{TITLE}, shipped with viz-model", help="Paste a long text to stream through.")
        left, right = st.columns(2)
        own.evict_tokens.init()
        own.evict_window.init()
        left.number_input("Tokens of the text", 3, MOST_TOKENS, key=own.evict_tokens.key,
                          help="The text's first tokens: each is predicted once, from the window the cache holds.")
        right.number_input("Window (keys each query sees)", 2, MOST_TOKENS, key=own.evict_window.key,
                           help="The kept initial tokens plus the most recent ones, the query's own included.")
        movable = model.config.positional not in INPUT_POSITIONS
        if movable:
            own.evict_rule.init()
            st.radio("Positions of the kept tokens", list(RULES), format_func=RULES.get, key=own.evict_rule.key,
                     horizontal=True, help="StreamingLLM re-indexes the cache: the sinks 0 .. n − 1, then the recent "
                     "tokens, the new token last. In the text, each token keeps its own position.")
        submitted = st.form_submit_button("Run", icon=":material/play_arrow:", type="primary")
    if not submitted:
        return True
    ids = text_ids(model, own.evict_text.get("").strip() or LONG_TEXT)[:int(own.evict_tokens.get())]
    rule = own.evict_rule.get() if movable else "text"
    bar = st.progress(0.0, text="Streaming the text through the window…")
    try:
        with warnings.catch_warnings():  # past the trained length: the full context's line is on the page
            warnings.simplefilter("ignore")
            result = sink_eviction(model, ids, int(own.evict_window.get()), KEPT, rule,
                                   progress=lambda done, total: bar.progress(done / total,
                                                                             text=f"Token {done} of {total}…"))
    except ValueError as err:
        bar.empty()
        own.evicted.set(None)
        widgets.input_problem(err, "The eviction cannot run: ")
        return False
    bar.empty()
    own.evicted.set((session.name, result))
    return True


def eviction_section(session: Session) -> None:
    """The section: the form, then the last run's table and chart for this model, and the paper's figures."""
    st.subheader("Sink eviction, live")
    st.caption("StreamingLLM (Xiao et al. 2023) reads a long text through a key/value cache of a fixed window: each "
               "query sees the first n tokens (kept as sinks) and the most recent ones, the rest evicted. Without the "
               "sinks the perplexity of window attention explodes once the first tokens leave; with a few kept it "
               "stays near the full context's.")
    model = session.model
    if model.config.positional in INPUT_POSITIONS:
        st.caption(f"This model adds a {model.config.positional} table of positions to its input, where a cached "
                   "token cannot be moved: each token keeps its position in the text (one masked pass), not "
                   "StreamingLLM's place in the cache.")
    if not run_form(session):
        return
    kept = own.evicted.get()
    if kept is None or kept[0] != session.name:
        st.info("Press Run: the text streams through the window once per kept count, all counts together.")
        return
    result = kept[1]
    perplexities = result.perplexities()
    tokens = len(result.full) + 1
    full = perplexities["full"]
    rows = [{"run": "full context", "keys each query sees": "every earlier token", "perplexity": round(full, 2),
             "× full context": 1.0}]
    rows += [{"run": f"{n} kept", "keys each query sees": f"{n} first + {result.window - n} most recent",
              "perplexity": round(perplexities[str(n)], 2), "× full context": round(perplexities[str(n)] / full, 3)}
             for n in result.kept]
    st.dataframe(rows, hide_index=True, width="stretch")
    fig = long_context_figures.eviction_figure(perplexities, result.window)
    widgets.chart(fig, "sink-eviction", key="sk_evict_chart")
    widgets.exports(fig, "sink-eviction", "sk_evict")
    trained = model.config.max_positions
    st.caption(f"{count(tokens, 'token')}, a window of {result.window}, positions {RULES[result.rule]}"
               + (f"; the full context runs past the {trained} positions this model was trained on, where it is "
                  "untested" if tokens > trained else "") + ".")
    st.markdown("**The paper's figures** (StreamingLLM, Table 1; not this model's):")
    st.dataframe([{"model": PAPER["model"], "text": PAPER["text"], "window": PAPER["window"],
                   "initial tokens kept": n, "perplexity (the paper's)": value}
                  for n, value in PAPER["perplexity"].items()], hide_index=True, width="stretch")
