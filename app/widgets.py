"""The parts every page draws: the sidebar, the sentence form and its trace, notices about the input, the translation
panel, charts with their export buttons, and error messages."""

from __future__ import annotations

import hashlib

import plotly.graph_objects as go
import streamlit as st
import torch

from app import export
from app.sessions import Session, load_model, model_languages, model_stamp, root_of, roots_label, searching_model
from app.state import MAX_TOP_K_SHOWN, RULE_LABELS, SEARCH_LABELS, bound, rule_choice, search_defaults
from app.texts import (
    EXAMPLE_DOMAINS,
    EXAMPLES,
    LOW_CONFIDENCE,
    VERY_LOW_CONFIDENCE,
    confidence_markdown,
    count,
    example_label,
    md_escape,
    output_words,
)
from viz_model.api import MAX_BEAM, MAX_INPUT_CHARS, TooLong, TranslationModel
from viz_model.lessons import teaching
from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.modeldir.languages import name as language_name
from viz_model.search.settings import MAX_LENGTH_PENALTY
from viz_model.trace import AttentionTrace

PLOTLY_CONFIG = {"displaylogo": False, "scrollZoom": False}


UNEXPECTED = "Something went wrong on this page"


def show_text(label: str, text: str) -> None:
    """A label and user/model text, displayed as text whatever characters it holds."""
    st.caption(label)
    st.markdown(md_escape(text) if text.strip() else "*(empty)*")


# --- sidebar -----------------------------------------------------------------------------------------------------
def sidebar(models: list[str]) -> Session | None:
    """Model picker, device badge and decoding settings; loads the model (cached). None if it cannot load."""
    ss = st.session_state
    with st.sidebar:
        bound(st.selectbox, "Model", "model", models, help=f"Every model directory found in {roots_label()}")
        name = ss["model"]
        root = root_of(name)
        # the full name and the language pair below the picker: a long name is cut inside the box
        st.caption(f"{md_escape(name)} · {model_languages(str(root), name)}")
        stamp = model_stamp(root, name)
        try:
            model = load_model(str(root), name, stamp)
        except (CheckpointError, OSError, ValueError, RuntimeError) as err:
            st.error(f"This model cannot be loaded: {err}")
            return None
        cfg = model.config
        color = "green" if model.device.type == "cuda" else "gray"
        st.badge(model.device_label, icon=":material/memory:", color=color)
        search = ss["search"]
        try:
            model = searching_model(str(root), name, stamp, search)
        except ValueError as err:  # int8 where it cannot run (a GPU, fp16 weights): say why, search as auto does
            st.warning(f"Search precision {search}: {err}. Searching with auto instead.")
            search = "auto"
        lang = target_language(model)
        if lang:
            model = searching_model(str(root), name, stamp, search, lang)
        rule = rule_choice(model.generation.rule)
        defaults = model.search_settings(rule)
        search_defaults(name, rule, defaults.beam, defaults.alpha)
        st.caption(f"{cfg.encoder_layers} encoder + {cfg.decoder_layers} decoder layers · {count(cfg.heads, 'head')} · "
                   f"d_model {cfg.d_model} · at most {cfg.max_positions} tokens · search with "
                   f"{model.search_precision} weights, every map and probability in full precision")
        if model.card and st.button("Model card", icon=":material/description:", key="model_card_button",
                                    help="Opens the model card in a wide window"):
            show_card(model.name, model.card)
        st.subheader("Decoding")
        own = RULE_LABELS[model.generation.rule].lower()
        bound(st.radio, "Search rule", "rule", list(RULE_LABELS),
              format_func=lambda v: f"The model's own ({own})" if v == "auto" else RULE_LABELS[v],
              help="As transformers' generate: the model's generation config (beam, length_penalty, "
                   "early_stopping, max_length, ...) and transformers' beam search, so an imported model shows the "
                   "translation its own framework gives. This project's: GNMT's length penalty ((5 + |Y|) / 6)^α, "
                   "OpenNMT's stop, source + 50 tokens. Imported models search as transformers by default.")
        bound(st.radio, "Search", "decoding", ["greedy", "beam"], horizontal=True,
              format_func=lambda v: "Greedy" if v == "greedy" else "Beam search")
        if ss["decoding"] == "beam":
            bound(st.slider, "Beam size", "beam", 2, MAX_BEAM)
        transformers_rule = rule == "transformers"
        low = -MAX_LENGTH_PENALTY if transformers_rule else 0.0
        ss["alpha"] = min(max(float(ss["alpha"]), low), MAX_LENGTH_PENALTY)
        bound(st.slider, "Length penalty α", "alpha", low, MAX_LENGTH_PENALTY, step=0.1,
              help="transformers' length_penalty: a finished hypothesis scores log p / |Y|^α (above 0 favours "
                   "longer translations)" if transformers_rule else
                   "GNMT length penalty: log p / ((5 + |Y|) / 6)^α; higher favours longer translations (0 = none)")
        bound(st.radio, "Search precision", "search", list(SEARCH_LABELS), format_func=SEARCH_LABELS.get,
              help="Which weights beam search runs on. The maps and probabilities are always recomputed in full "
                   "precision for the chosen output, so with int8 a step may show a top candidate other than the "
                   "token the search chose (it is flagged). int8 can also change the translation itself.")
        if transformers_rule and model.search_precision == "int8":
            st.caption(":orange[int8 weights: the translation can differ from generate's; full precision gives "
                       "generate's.]")
        bound(st.slider, "Top-k candidates per step", "top_k", 1, MAX_TOP_K_SHOWN)
        bound(st.checkbox, "Cut sentences longer than the model's maximum", "truncate",
              help=f"Otherwise a sentence above {cfg.max_positions} tokens is refused with a message.")
    beam = 1 if ss["decoding"] == "greedy" else int(ss["beam"])
    return Session(model, str(root), name, stamp, beam, float(ss["alpha"]), int(ss["top_k"]), bool(ss["truncate"]),
                   search, lang, None if ss["rule"] == "auto" else rule)


def target_language(model: TranslationModel) -> str:
    """A many-to-many model's target-language picker (its codes, by name); "" for the language it was imported
    with, and for a model of one fixed pair (no picker)."""
    ss = st.session_state
    codes = model.target_languages
    if not codes:
        ss["lang"] = ""
        return ""
    own = model.languages.target
    if ss.get("lang") == own:
        ss["lang"] = ""
    if ss.get("lang") and ss["lang"] not in codes:
        st.warning(f"`lang={ss['lang'][:20]}` ignored: not one of this model's {len(codes)} languages.")
        ss["lang"] = ""
    options = ["", *sorted((c for c in codes if c != own), key=language_name)]
    bound(st.selectbox, "Translate into", "lang", options,
          format_func=lambda c: f"{language_name(c or own)} ({c or own})" + ("" if c else ", as imported"),
          help="A many-to-many model translates into any of its languages: its first output token is that "
               "language's code, forced.")
    return ss["lang"]


@st.dialog("Model card", width="large")
def show_card(name: str, card: str) -> None:
    """The model card in a wide dialog (the sidebar made it a very tall narrow column)."""
    st.caption(name)
    st.markdown(card)


# --- sentence form and trace -------------------------------------------------------------------------------------
def _pick_example() -> None:
    ss = st.session_state
    example = ss.get("example")
    if example:
        ss["sentence"] = ss["sentence_input"] = example
        ss["target"] = ss["target_input"] = ""
    ss["example"] = None


def _submit() -> None:
    ss = st.session_state
    ss["sentence"] = ss.get("sentence_input", "")
    ss["target"] = ss.get("target_input", "")


def sentence_form(session: Session) -> None:
    """Examples, the sentence box, the optional forced target and the Translate button."""
    ss = st.session_state
    ss.setdefault("sentence_input", ss.get("sentence", ""))
    ss.setdefault("target_input", ss.get("target", ""))
    known = trained_domains(session)
    pair = session.model.languages
    st.selectbox("Examples", EXAMPLES, index=None, key="example", on_change=_pick_example,
                 format_func=lambda sentence: example_label(sentence, known),
                 placeholder="Pick an example sentence…")
    with st.form("sentence_form", border=False):
        st.text_area(f"Sentence to translate ({pair.source_name})", key="sentence_input", height=80,
                     placeholder=f"Type a sentence in {pair.source_name} (up to {MAX_INPUT_CHARS:,} characters)")
        with st.expander("Force a target translation (teacher forcing)", expanded=bool(ss.get("target"))):
            st.text_input("Target text (optional)", key="target_input",
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


def sentence_and_trace(session: Session) -> AttentionTrace | None:
    """A collapsed "Change the sentence" form, then the current sentence's trace (None after an error message)."""
    with st.expander("Change the sentence", expanded=False):
        sentence_form(session)
    return current_trace(session)


def trace_or_stop(session: Session) -> AttentionTrace:
    """`sentence_and_trace`, and the page stops where there is no trace (the reason is already shown)."""
    trace = sentence_and_trace(session)
    if trace is None:
        st.stop()
    return trace


def current_trace(session: Session) -> AttentionTrace | None:
    """The trace of the submitted sentence, or None after showing why there is none."""
    ss = st.session_state
    text = ss.get("sentence", "")
    target = ss.get("target", "") or None
    try:
        # the library's checks, before the cached trace (whose messages need the user's words)
        session.model.request(text, target, session.truncate, ("the sentence", "the target text"))
    except TooLong as err:
        if err.side == "source":
            st.error(f"This sentence is {err.tokens} tokens long; the model reads at most {err.limit} tokens. "
                     "Shorten it, or tick “Cut sentences longer than the model's maximum” in the sidebar.")
        else:
            st.error(f"The target text is longer than the model's maximum of {err.limit} tokens; shorten it.")
        return None
    except ValueError as err:
        message = str(err)
        message = message[0].upper() + message[1:] + "."
        if "empty" in message:
            st.info(message)
        else:
            st.error(message)
        return None
    try:
        with st.spinner("Translating…"):
            return session.trace(text, target)
    except ValueError as err:
        st.error(f"This sentence cannot be translated: {err}")
    except torch.cuda.OutOfMemoryError:
        out_of_memory()
    except RuntimeError as err:
        st.error(f"The model failed on this sentence: {err}")
    return None


def out_of_memory() -> None:
    """After a CUDA out-of-memory error: free the GPU's cached blocks and say so; the next request runs normally."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    st.error("The GPU ran out of memory on this request. Its memory has been freed: try again, or use a shorter "
             "sentence or a smaller beam.")


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


def steps_table(trace: AttentionTrace) -> None:
    with st.expander("Decoding steps: what the model chose at each position, and its top candidates"):
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
        st.download_button("Interactive HTML", data=lambda: export.figure_html(fig), file_name=f"{name}.html",
                           mime="text/html", key=f"{key}_html", on_click="ignore", icon=":material/code:")
        if csv is not None:
            st.download_button("This map as CSV", data=lambda: csv().to_csv(), file_name=f"{name}.csv",
                               mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/table:")
        ok, why = export.images_available()
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
                    images = export.figure_images(fig)
                stamp = _fingerprint(fig)
                rendered = ss[f"_img_{key}"] = (stamp, images)
            except export.ExportError as err:
                st.error(str(err))
        if rendered is not None and rendered[0] == stamp:
            images = rendered[1]
            st.download_button("PNG image", data=images["png"], file_name=f"{name}.png", mime="image/png",
                               key=f"{key}_png", on_click="ignore", icon=":material/image:")
            st.download_button("SVG image", data=images["svg"], file_name=f"{name}.svg", mime="image/svg+xml",
                               key=f"{key}_svg", on_click="ignore", icon=":material/image:")


def trace_downloads(trace: AttentionTrace) -> None:
    with st.popover("Download trace", icon=":material/data_object:"):
        st.caption("Every attention map, mask, encoding and decoding step of this translation.")
        st.download_button("Trace as JSON", data=trace.to_json, file_name="trace.json", mime="application/json",
                           key="trace_json", on_click="ignore")
        st.download_button("Trace as NPZ (NumPy)", data=trace.to_npz_bytes, file_name="trace.npz",
                           mime="application/octet-stream", key="trace_npz", on_click="ignore")


# --- teaching pages ----------------------------------------------------------------------------------------------
@st.cache_data(show_spinner="Sampling random queries and keys…", max_entries=8)
def saturation(dims: tuple[int, ...], keys: int, samples: int, seed: int):
    return teaching.saturation(dims, keys, samples, seed)


def matrix_table(frame, digits: int = 4, height: int | None = None) -> None:
    """A small numeric table, rounded for display (the exact values stay in the data)."""
    st.dataframe(frame.style.format(f"{{:.{digits}f}}"), width="content", height=height or "auto")


def input_problem(err: Exception, prefix: str = "") -> None:
    """An inline message for a value the user typed (`teaching.InputError`), shown as text (it may quote it)."""
    message = prefix + str(err)
    message = message[0].upper() + message[1:] + ("" if message.endswith(".") else ".")
    st.error(md_escape(message))
