"""Ablation's parts every kind of model shows: the heads to switch off (a list and a clickable grid), the output with
and without them, and the heads' importance over a corpus."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

import numpy as np
import streamlit as st

from app import analyze_pages, sessions, state, texts, widgets
from app.page_settings import ABLATION as own
from viz_model.analysis import store
from viz_model.analysis.ablation import AblationResult, Head, all_heads, layer_counts
from viz_model.plot import analysis_figures

IMPORTANCE_COLUMNS = {"nll_rise": "NLL rise (nats per token)", "bleu_drop": "BLEU drop"}
Result = TypeVar("Result")


def toggle_head(chart_key: str) -> None:
    """A click on a head grid switches that head on or off; the grid is then redrawn without a selection."""
    point = state.selected_point(st.session_state.get(chart_key))
    if point is None or len(point) != 3:
        return
    head = (str(point[0]), int(point[1]), int(point[2]))
    chosen = list(own.heads.get())
    own.heads.set([h for h in chosen if h != head] if head in chosen else [*chosen, head])
    own.redraws.set(own.redraws.get() + 1)


def clickable_grid(fig, name: str, key: str) -> None:
    chart_key = f"{key}_{own.redraws.get()}"  # a new key after every click: the grid is drawn without a selection
    widgets.chart(fig, name, key=chart_key, on_select=partial(toggle_head, chart_key))


def heading(output: str, again: str, along: str = "") -> None:
    """The page's title and what it does: switch heads off and `again` (make the `output` again)."""
    st.title("Ablation")
    st.caption("Switch heads off (their output multiplied by 0, for this request only: the model every visitor "
               f"shares is not changed) and {again}: does the {output} change, and how much less likely does the "
               f"original {output} become?" + along)


def pick_heads(config, default: Head) -> list[Head]:
    """The heads to switch off (a list and a grid to click; `default` where the last model's do not exist here)."""
    layers, everything = layer_counts(config), all_heads(config)
    own.heads.init([default])
    kept = [tuple(h) for h in own.heads.get() if tuple(h) in everything]  # another model may be smaller, or have no
    own.heads.set(kept if kept or not own.heads.get() else [default])  # cross heads: then its own default
    state.bound(st.multiselect, "Heads to switch off", own.heads, everything, format_func=analyze_pages.head_label,
                placeholder="Pick heads, or click them in the grid below")
    chosen = sorted(own.heads.get(), key=everything.index)
    grid = {kind: np.zeros((count, config.heads)) for kind, count in layers.items()}
    fig = analysis_figures.head_grid(grid, f"Heads switched off: {len(chosen)} of {len(everything)} (click a head to "
                                           "add or remove it)", "switched off", [[0, "#f0f2f6"], [1, "#f0f2f6"]],
                                     selected=chosen, showscale=False)
    clickable_grid(fig, "ablation-heads", "abl_grid")
    return chosen


def off_label(chosen: list[Head]) -> str:
    return "1 head" if len(chosen) == 1 else f"{len(chosen)} heads"


def ablated(chosen: list[Head], doing: str, compute: Callable[[], Result]) -> Result | None:
    """`compute()` (the ablation of `chosen`, shown as `doing` ... without N heads); None with nothing chosen or
    when it cannot run (said here)."""
    if not chosen:
        st.info("Pick at least one head to switch off.")
        return None
    try:
        with st.spinner(f"{doing} without {len(chosen)} heads…"):
            return compute()
    except ValueError as err:
        widgets.input_problem(err, "This ablation cannot be run: ")
        return None


def comparison(result: AblationResult, chosen: list[Head], output: str) -> None:
    """The `output` with every head on and with `chosen` off, their token diff and log-probabilities."""
    off = off_label(chosen)
    left, right = st.columns(2)
    with left, st.container(border=True):
        widgets.show_text(f"{output.capitalize()}, every head on", result.translation)
    with right, st.container(border=True):
        widgets.show_text(f"{output.capitalize()}, {off} off", result.ablated_translation)
    st.caption("Token diff (intact → heads off): :red-background[~~deleted~~] pieces are only in the intact "
               f"{output}, :green-background[inserted] ones only in the ablated one.")
    st.markdown(analyze_pages.diff_markdown(result.diff))
    if result.changed:
        st.dataframe(analyze_pages.diff_table(result.diff), hide_index=True, width="stretch")
    else:
        st.success(f"The {output} did not change: these heads are not needed for this output.")
    a, b = st.columns(2)
    a.metric(f"log P(original {output}), every head on", f"{result.log_prob_intact:.3f}")
    b.metric(f"log P(original {output}), {off} off", f"{result.log_prob_ablated:.3f}",
             delta=f"{result.log_prob_change:+.3f}",
             help=f"The intact model's {output} scored by the model without these heads (teacher-forced); "
                  "the change below is negative when it became less likely.")


def importance(session: sessions.Session, chosen: list[Head], output: str, files: str = "") -> None:
    """The model directory's head-importance table as a clickable grid (`files`: what --src and --tgt hold, where
    the command's note needs it)."""
    st.subheader("Head importance over a corpus")
    table, problem = analyze_pages.stored_table(session, "importance")
    if problem is not None:
        st.error(texts.md_escape(f"The importance table cannot be used: {problem}"))
        return
    if table is None:
        st.info(f"This model directory has no importance table ({store.HEAD_IMPORTANCE_FILE}). Write it with "
                "`viz-model importance --model MODEL_DIR --src FILE --tgt FILE --limit 500 --out "
                f"MODEL_DIR/{store.HEAD_IMPORTANCE_FILE}` (one teacher-forced pass over the corpus per head"
                + files + ").")
        return
    columns = [c for c in IMPORTANCE_COLUMNS if c in table.columns]
    state.clamp_choice(own.metric, columns, columns[0], "Measure")
    state.bound(st.radio, "Measure", own.metric, columns, horizontal=True, format_func=IMPORTANCE_COLUMNS.get)
    metric = own.metric.get()
    layers = layer_counts(session.model.config)
    fig = analysis_figures.head_grid(analysis_figures.table_grid(table, metric, layers, session.model.config.heads),
                                     f"{IMPORTANCE_COLUMNS[metric]} when each head alone is switched off",
                                     IMPORTANCE_COLUMNS[metric], "RdBu_r", selected=chosen, zmid=0.0)
    clickable_grid(fig, f"head-importance-{metric}", "abl_importance")
    st.caption(f"From {store.HEAD_IMPORTANCE_FILE}. Red heads matter: without them the reference {output}s "
               "become less likely; blue ones even help when removed. Click a head to switch it off above.")
    widgets.exports(fig, f"head-importance-{metric}", "abl_importance_export",
                    csv=lambda: analyze_pages.display_heads(table))
