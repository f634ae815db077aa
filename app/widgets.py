"""The parts every page draws: the sentence form, notices about the input, the translation panel, charts with their
export buttons, and messages. Drawing only: the sidebar is `sidebar`, the trace `tracing`."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import plotly.graph_objects as go
import streamlit as st

from app import figure_files
from app.sessions import Session
from app.shared_settings import FORM, SHARED
from app.texts import (
    EXAMPLE_DOMAINS,
    EXAMPLES,
    LOW_CONFIDENCE,
    VERY_LOW_CONFIDENCE,
    confidence_markdown,
    example_label,
    md_escape,
    output_words,
)
from viz_model.data.typed_text import MAX_INPUT_CHARS
from viz_model.kinds.translator import TranslationModel
from viz_model.trace import AttentionTrace

PLOTLY_CONFIG = {"displaylogo": False, "scrollZoom": False}


UNEXPECTED = "Something went wrong on this page"


def show_text(label: str, text: str) -> None:
    """A label and user/model text, displayed as text whatever characters it holds."""
    st.caption(label)
    st.markdown(md_escape(text) if text.strip() else "*(empty)*")


# --- sentence form and trace -------------------------------------------------------------------------------------
def _pick_example() -> None:
    example = FORM.example.get()
    if example:
        SHARED.sentence.set(example)
        FORM.sentence_box.set(example)
        SHARED.target.set("")
        FORM.target_box.set("")
    FORM.example.set(None)


def _submit() -> None:
    SHARED.sentence.set(FORM.sentence_box.get(""))
    SHARED.target.set(FORM.target_box.get(""))


def sentence_form(session: Session) -> None:
    """Examples, the sentence box, the optional forced target and the Translate button."""
    FORM.sentence_box.init(SHARED.sentence.get(""))
    FORM.target_box.init(SHARED.target.get(""))
    known = trained_domains(session)
    pair = session.model.languages
    st.selectbox("Examples", EXAMPLES, index=None, key=FORM.example.key, on_change=_pick_example,
                 format_func=lambda sentence: example_label(sentence, known),
                 placeholder="Pick an example sentence…")
    with st.form("sentence_form", border=False):
        st.text_area(f"Sentence to translate ({pair.source_name})", key=FORM.sentence_box.key, height=80,
                     placeholder=f"Type a sentence in {pair.source_name} (up to {MAX_INPUT_CHARS:,} characters)")
        with st.expander("Force a target translation (teacher forcing)", expanded=bool(SHARED.target.get())):
            st.text_input("Target text (optional)", key=FORM.target_box.key,
                          help=f"The model reads this {pair.target_name} text instead of its own translation; every "
                               "map then "
                               "shows how it would attend while producing it.")
        st.form_submit_button("Translate", type="primary", on_click=_submit, icon=":material/translate:")


def trained_domains(session: Session) -> list[str] | None:
    """The kinds of text the session's model was trained on, None when its directory does not say."""
    stats = session.model.training_stats
    return stats.domains if stats is not None else None


def domain_notice(model: TranslationModel) -> None:
    """What the model was trained on, so nobody mistakes a fluent wrong translation for the model's best."""
    stats = model.training_stats
    if stats is None:
        st.caption("This model directory has no training statistics: see its model card (sidebar) for what it "
                   "was trained on.")
        return
    parts = [f"{c.domain} ({c.name}, {c.sentences:,} sentence pairs)" for c in stats.corpora]
    missing = [d for d in EXAMPLE_DOMAINS if d not in stats.domains]
    text = f"This model was trained on {' and '.join(parts)}."
    if missing:
        text += (f" Other kinds of text, such as {' or '.join(missing)}, are beyond its reach: expect fluent but "
                 "wrong translations in the style of its training data.")
    st.info(text, icon=":material/school:")


def input_warnings(session: Session, text: str) -> None:
    """Flags for a sentence beyond the model's reach (unknown characters, rare pieces, unseen length)."""
    try:
        assessment = session.model.assess(text)
    except ValueError:
        return
    if assessment.warnings:
        st.warning("This sentence is beyond what the model learned, so the translation is likely wrong:\n\n"
                   + "\n".join(f"- {md_escape(w)}" for w in assessment.warnings), icon=":material/warning:")


def confidence_line(trace: AttentionTrace) -> None:
    """The words the model was unsure of, highlighted (or a note that it was sure of every word)."""
    words = output_words(trace)
    if all(w.probability >= LOW_CONFIDENCE for w in words):
        st.caption(f"The model gave every word a probability of at least {LOW_CONFIDENCE:.0%}.")
        return
    st.caption(f"Word by word, how sure the model was: :orange-background[below {LOW_CONFIDENCE:.0%}] · "
               f":red-background[below {VERY_LOW_CONFIDENCE:.0%}] (the decoding steps below give the numbers)")
    st.markdown(confidence_markdown(words))


def translation_panel(trace: AttentionTrace) -> None:
    settings = trace.settings
    label = "Forced target (teacher forcing)" if settings.get("forced") else "Translation"
    with st.container(border=True):
        show_text(label, trace.translation)
        confidence_line(trace)
        decoding = "greedy" if settings["beam"] == 1 else f"beam {settings['beam']}, α {settings['alpha']:g}"
        rule = settings.get("rule", "project")
        decoding += {"transformers": " as transformers' generate", "project": " by this project's rules"}.get(rule, "")
        timing = trace.timings.get("total_ms")
        search = settings.get("search", "fp32")
        searched = "forced output" if search == "forced" else f"searched with {search} weights"
        st.caption(f"{decoding} · {searched} · log-probability {trace.log_probability:.3f} (full precision) · "
                   f"{len(trace.source_tokens)} source / "
                   f"{len(trace.target_tokens)} target tokens · {trace.device}"
                   + (f" · {timing:.0f} ms" if timing is not None else ""))


@contextmanager
def folded(label: str, key: str) -> Iterator[bool]:
    """An expander whose contents a page draws only while it is open (opening it reruns the page): a table folded
    away costs the browser nothing on a page's first view. Yields whether it is open."""
    box = st.expander(label, key=key, on_change="rerun")
    with box:
        yield bool(box.open)


def steps_table(trace: AttentionTrace) -> None:
    with folded("Decoding steps: what the model chose at each position, and its top candidates",
                "steps_table") as is_open:
        if not is_open:
            return
        rows = [{"position": s.position, "read": s.input_token, "chose": s.token,
                 "probability": round(s.probability, 4),
                 "candidates": ", ".join(f"{t} {p:.3f}" for t, p in zip(s.top_tokens, s.top_probabilities)),
                 "not the top candidate because": trace.step_note(i) or ""}
                for i, s in enumerate(trace.steps)]
        st.dataframe(rows, hide_index=True, width="stretch",
                     column_config={"candidates": st.column_config.TextColumn(width="large"),
                                    "not the top candidate because": st.column_config.TextColumn(width="large")})


# --- charts and exports ------------------------------------------------------------------------------------------
def chart(fig: go.Figure, name: str, key: str | None = None, on_select=None, selection_mode="points"):
    """Draw a figure (client-side PNG in the mode bar too); returns the selection state when `on_select`."""
    config = dict(PLOTLY_CONFIG, toImageButtonOptions={"format": "png", "filename": name, "scale": 2})
    if on_select is None:
        return st.plotly_chart(fig, key=key, config=config, width="stretch")
    return st.plotly_chart(fig, key=key, config=config, width="stretch", on_select=on_select,
                           selection_mode=selection_mode)


def _fingerprint(fig: go.Figure) -> str:
    return hashlib.sha1(fig.to_json().encode()).hexdigest()[:16]


def exports(fig: go.Figure, name: str, key: str, csv=None) -> None:
    """Export widgets for one figure: HTML (lazy), PNG and SVG (rendered on request), optional CSV (lazy)."""
    ss = st.session_state
    with st.popover("Export", icon=":material/download:"):
        st.download_button("Interactive HTML", data=lambda: figure_files.figure_html(fig), file_name=f"{name}.html",
                           mime="text/html", key=f"{key}_html", on_click="ignore", icon=":material/code:")
        if csv is not None:
            st.download_button("This map as CSV", data=lambda: csv().to_csv(), file_name=f"{name}.csv",
                               mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/table:")
        ok, why = figure_files.images_available()
        if not ok:
            st.caption(why)
            return
        rendered = ss.get(f"_img_{key}")
        stamp = _fingerprint(fig) if rendered is not None else ""  # hash the figure only once images exist
        fresh = rendered is not None and rendered[0] == stamp
        if not fresh and st.button("Render PNG and SVG", key=f"{key}_render", icon=":material/image:",
                                   help="Plotly's image export (kaleido) renders through Chromium: a few seconds."):
            try:
                with st.spinner("Rendering images…"):
                    images = figure_files.figure_images(fig)
                stamp = _fingerprint(fig)
                rendered = ss[f"_img_{key}"] = (stamp, images)
            except figure_files.ExportError as err:
                st.error(str(err))
        if rendered is not None and rendered[0] == stamp:
            images = rendered[1]
            st.download_button("PNG image", data=images["png"], file_name=f"{name}.png", mime="image/png",
                               key=f"{key}_png", on_click="ignore", icon=":material/image:")
            st.download_button("SVG image", data=images["svg"], file_name=f"{name}.svg", mime="image/svg+xml",
                               key=f"{key}_svg", on_click="ignore", icon=":material/image:")


def memory_report(line: str | None, refused: bool = False) -> None:
    """What the library's memory estimate said before a trace (`memory_estimate.plan_trace`), the one place a page
    reports it: its refusal as an error (`refused`), else its line as a caption (none: a trace served without a
    check)."""
    if refused:
        st.error(f"This prompt is not run: {line}.")
    elif line:
        st.caption(line)


def trace_downloads(trace: AttentionTrace) -> None:
    with st.popover("Download trace", icon=":material/data_object:"):
        recipes = any(trace.reading(kind) == "rows" for kind in trace.recipes())
        st.caption("Every attention map, mask, encoding and decoding step of this trace" + (
            " (a long prompt's maps as each layer's recipe: `AttentionTrace.load` makes them)." if recipes else "."))
        st.download_button("Trace as JSON", data=lambda: trace.with_whole_maps().to_json(), file_name="trace.json",
                           mime="application/json", key="trace_json", on_click="ignore")
        st.download_button("Trace as NPZ (NumPy)", data=lambda: trace.with_whole_maps().to_npz_bytes(),
                           file_name="trace.npz", mime="application/octet-stream", key="trace_npz", on_click="ignore")


# --- teaching pages ----------------------------------------------------------------------------------------------
def matrix_table(frame, digits: int = 4, height: int | None = None) -> None:
    """A small numeric table, rounded for display (the exact values stay in the data)."""
    st.dataframe(frame.style.format(f"{{:.{digits}f}}"), width="content", height=height or "auto")


def input_problem(err: Exception, prefix: str = "") -> None:
    """An inline message for a value the user typed (`teaching.InputError`), shown as text (it may quote it)."""
    message = prefix + str(err)
    message = message[0].upper() + message[1:] + ("" if message.endswith(".") else ".")
    st.error(md_escape(message))
