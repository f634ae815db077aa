"""What every page shares: the cached model and traces, the sidebar settings, the sentence form, the URL state
and the export widgets. Pages stay thin: they call these helpers, `viz_model` and `app.figures`.

Session-state keys: ``model``, ``decoding``, ``beam``, ``alpha``, ``top_k``, ``truncate`` (sidebar); ``sentence``,
``target`` (the submitted text; the form's boxes are ``sentence_input`` / ``target_input``); ``view``, ``kind``,
``layer`` (1-based), ``head`` ("1".."H", "mean", "max"), ``level`` (explorer controls). Each value is drawn by a
widget keyed ``w_<key>`` (see `bound`), so it survives views and pages that do not draw it. The URL (query
parameters sentence, target, model, view, kind, layer, head, beam, alpha) is read on a session's first run and
rewritten after every run.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlparse

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

import viz_model
from viz_model.api import ASSETS_DIR, MAX_BEAM, MAX_INPUT_CHARS, MAX_TOP_K, TranslationModel, check_text
from viz_model.attribution import Attribution, attribute_ids
from viz_model.attribution.faithfulness import deletion_scores
from viz_model.attribution.gradients import DEFAULT_STEPS
from viz_model.checkpoint import CONFIG, TOKENIZER, WEIGHTS, CheckpointError
from viz_model.coverage import TRAINING_STATS, WordConfidence, word_confidences
from viz_model.decoding import BeamTree
from viz_model.introspect import LayerScores, layer_scores
from viz_model.kinds import KIND_LABELS
from viz_model.languages import LanguagePair, read_languages
from viz_model.plot import attention as figures
from viz_model.trace import AttentionTrace

from . import export, teaching

EXAMPLE_DOMAINS = {  # keys are `viz_model.coverage.DOMAINS` values: matched against what a model was trained on
    "image captions": (
        "Two young dogs are playing in the snow.",
        "A man in a blue shirt is riding a bike down the street.",
        "A little girl climbs into a wooden playhouse.",
        "Several people are standing in front of a large building.",
        "A woman is reading a book on the beach.",
    ),
    "everyday sentences": (
        "Where is the train station?",
        "I love you.",
        "Could you help me, please?",
        "We are going to the cinema tomorrow.",
        "My brother has lived in Berlin for ten years.",
    ),
}
EXAMPLES = tuple(sentence for group in EXAMPLE_DOMAINS.values() for sentence in group)
LOW_CONFIDENCE = 0.5  # output words below this probability are highlighted
VERY_LOW_CONFIDENCE = 0.2
VIEWS = {"heatmap": "Head heatmap", "model": "Model view", "head": "Head view", "focus": "Token focus"}
LEVEL_LABELS = {"piece": "Subword pieces", "word": "Words (pieces merged)"}
DEFAULTS = {"decoding": "beam", "beam": 4, "alpha": 0.6, "top_k": 5, "truncate": False, "view": "heatmap",
            "kind": "encoder", "layer": 1, "head": "1", "level": "piece", "search": "auto"}
URL_KEYS = ("sentence", "target", "model", "view", "kind", "layer", "head", "level", "beam", "alpha", "search")
SEARCH_LABELS = {"auto": "Auto (int8 on the CPU)", "int8": "int8", "fp32": "Full precision (fp32)"}
TRACE_CACHE_ENTRIES = 12
PLOTLY_CONFIG = {"displaylogo": False, "scrollZoom": False}
UNEXPECTED = "Something went wrong on this page"


# --- models and traces -------------------------------------------------------------------------------------------
def assets_root() -> Path:
    return Path(os.environ.get("VIZ_MODEL_ASSETS") or ASSETS_DIR)


def model_names() -> list[str]:
    return viz_model.available_models(assets_root())


STAMPED_FILES = (WEIGHTS, CONFIG, TOKENIZER, TRAINING_STATS)


def model_stamp(root: Path, name: str) -> str:
    """Size and modification time of each file a model loads: a changed model directory gets a fresh cache entry."""
    parts = []
    for file in STAMPED_FILES:
        try:
            info = (root / name / file).stat()
            parts.append(f"{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def load_model(root: str, name: str, stamp: str) -> TranslationModel:
    """One model per (directory, version) per process, shared by every session (read-only at inference)."""
    del stamp  # part of the cache key only
    if name not in viz_model.available_models(root):  # only ever a real directory directly under the assets root
        raise CheckpointError(f"no model directory named {name!r} in {root}")
    return viz_model.load(Path(root) / name, device="auto")


@st.cache_resource(show_spinner="Preparing the search…", max_entries=8)
def searching_model(root: str, name: str, stamp: str, search: str) -> TranslationModel:
    """The cached model searching in precision `search` (the network is shared with `load_model`'s, not copied)."""
    model = load_model(root, name, stamp)
    return model if search == "auto" else model.with_search(search)


@st.cache_data(show_spinner=False, max_entries=TRACE_CACHE_ENTRIES)
def compute_trace(root: str, name: str, stamp: str, search: str, text: str, beam: int, alpha: float,
                  target: str | None, top_k: int, truncate: bool, positions: bool = True) -> AttentionTrace:
    return searching_model(root, name, stamp, search).trace(text, beam=beam, alpha=alpha, target=target,
                                                            top_k=top_k, truncate=truncate, positions=positions)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_beam_tree(root: str, name: str, stamp: str, search: str, text: str, beam: int, alpha: float,
                      truncate: bool) -> BeamTree:
    return searching_model(root, name, stamp, search).beam_tree(text, beam=beam, alpha=alpha, truncate=truncate)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_layer_scores(root: str, name: str, stamp: str, sources: tuple[tuple[int, ...], ...],
                         targets: tuple[tuple[int, ...], ...], kind: str, layer: int) -> LayerScores:
    model = load_model(root, name, stamp)
    return layer_scores(model.network, [list(s) for s in sources], kind, layer, [list(t) for t in targets])


ATTRIBUTION_MAX_STEPS = 128  # integrated-gradient steps one request may ask for (the library allows 256)


@st.cache_data(show_spinner=False, max_entries=8)
def compute_attribution(root: str, name: str, stamp: str, source_ids: tuple[int, ...], output_ids: tuple[int, ...],
                        methods: tuple[str, ...], steps: int, foil: int | None) -> Attribution:
    model = load_model(root, name, stamp)
    if not 1 <= steps <= ATTRIBUTION_MAX_STEPS:
        raise ValueError(f"integrated-gradient steps must be from 1 to {ATTRIBUTION_MAX_STEPS} here, got {steps}")
    result = attribute_ids(model.network, list(source_ids), list(output_ids), methods, steps, foil,
                           model.tokenizer.pieces)
    result.model_name = name
    return result


@st.cache_data(show_spinner=False, max_entries=8)
def compute_deletions(root: str, name: str, stamp: str, source_ids: tuple[int, ...], output_ids: tuple[int, ...],
                      methods: tuple[str, ...], ranked: tuple[str, ...], ks: tuple[int, ...], steps: int
                      ) -> pd.DataFrame:
    """The deletion scores of the `ranked` source rankings (from an attribution of `methods`)."""
    model = load_model(root, name, stamp)
    result = compute_attribution(root, name, stamp, source_ids, output_ids, methods, steps, None)
    return deletion_scores(model.network, list(source_ids), list(output_ids),
                           {m: result.source_scores(m) for m in ranked}, ks)


@dataclass
class Session:
    """The loaded model and the decoding settings chosen in the sidebar."""

    model: TranslationModel
    root: str
    name: str
    stamp: str
    beam: int
    alpha: float
    top_k: int
    truncate: bool
    search: str = "auto"

    def trace(self, text: str, target: str | None = None, positions: bool = True) -> AttentionTrace:
        return compute_trace(self.root, self.name, self.stamp, self.search, text, self.beam, self.alpha,
                             target or None, self.top_k, self.truncate, positions)

    def beam_tree(self, text: str, beam: int, alpha: float) -> BeamTree:
        """The recorded beam search of `text` (see `viz_model.decoding.beam_search_tree`), cached."""
        return compute_beam_tree(self.root, self.name, self.stamp, self.search, text, beam, alpha, self.truncate)

    def attribution(self, trace: AttentionTrace, methods: tuple[str, ...], steps: int = DEFAULT_STEPS,
                    foil: int | None = None) -> Attribution:
        """Attributions of the trace's translation (teacher-forced on its output), cached."""
        return compute_attribution(self.root, self.name, self.stamp, tuple(trace.source_ids), tuple(trace.output_ids),
                                   methods, steps, foil)

    def deletions(self, trace: AttentionTrace, methods: tuple[str, ...], ranked: tuple[str, ...],
                  ks: tuple[int, ...], steps: int = DEFAULT_STEPS) -> pd.DataFrame:
        return compute_deletions(self.root, self.name, self.stamp, tuple(trace.source_ids), tuple(trace.output_ids),
                                 methods, ranked, ks, steps)

    def layer_scores(self, sources: list[list[int]], targets: list[list[int]], kind: str, layer: int) -> LayerScores:
        return compute_layer_scores(self.root, self.name, self.stamp, tuple(map(tuple, sources)),
                                    tuple(map(tuple, targets)), kind, layer)


def model_languages(root: str, name: str) -> str:
    """"en → de" for the model picker, from the directory's languages.json ("?" when it is unreadable)."""
    try:
        return read_languages(Path(root) / name).label
    except (OSError, ValueError):
        return "?"


# --- text --------------------------------------------------------------------------------------------------------
def count(n: int, noun: str, lead: str = "") -> str:
    """"1 head", "4 heads" (with `lead`: "Each of the 4 heads", or "The 1 head" for one)."""
    if n == 1:
        return f"{'The ' if lead else ''}1 {noun}"
    return f"{lead + ' ' if lead else ''}{n} {noun}s"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~:$&\"'=^])")


def md_escape(text: str) -> str:
    """Text shown literally by st.markdown: every Markdown/HTML character backslash-escaped (CommonMark)."""
    return _MD_SPECIAL.sub(r"\\\1", text).replace("\n", "  \n")


def show_text(label: str, text: str) -> None:
    """A label and user/model text, displayed as text whatever characters it holds."""
    st.caption(label)
    st.markdown(md_escape(text) if text.strip() else "*(empty)*")


# --- state and URL -----------------------------------------------------------------------------------------------
def init_state(models: list[str]) -> None:
    """On a session's first run, take the state from the URL (query parameters), reporting bad values."""
    ss = st.session_state
    if ss.get("_initialised"):
        if ss.get("model") not in models:
            ss["model"] = models[0]
        return
    ss["_initialised"] = True
    for key, value in DEFAULTS.items():
        ss.setdefault(key, value)
    qp = st.query_params
    problems: list[str] = []

    def bad(name: str, value: str, why: str) -> None:  # in a code span Markdown escapes would show literally
        shown = value[:60].replace("`", "'").replace("\n", " ")
        problems.append(f"`{name}={shown}` ignored: {why}")

    sentence = qp.get("sentence")
    ss["sentence"] = sentence if sentence is not None else EXAMPLES[0]
    ss["target"] = qp.get("target", "")
    ss["sentence_input"], ss["target_input"] = ss["sentence"], ss["target"]
    model = qp.get("model")
    if model is not None and model not in models:
        bad("model", model, f"no such model; available: {', '.join(models)}")
        model = None
    ss["model"] = model or models[0]
    def choose(name: str, options, why: str = "") -> None:  # a parameter that must be one of `options`
        value = qp.get(name)
        if value is not None:
            if value in options:
                ss[name] = value
            else:
                bad(name, value, why or f"use one of {', '.join(options)}")

    choose("view", VIEWS)
    choose("kind", KIND_LABELS, "use encoder, decoder or cross")
    layer = qp.get("layer")
    if layer is not None:
        if url_number(layer) >= 1:
            ss["layer"] = url_number(layer)
        else:
            bad("layer", layer, "use a layer number from 1")
    head = qp.get("head")
    if head is not None:
        if head in figures.AGGREGATES or url_number(head) >= 1:
            ss["head"] = head if head in figures.AGGREGATES else str(url_number(head))
        else:
            bad("head", head, "use a head number from 1, mean or max")
    choose("level", LEVEL_LABELS)
    beam = qp.get("beam")
    if beam is not None:
        if 1 <= url_number(beam) <= MAX_BEAM:
            ss["decoding"] = "greedy" if url_number(beam) == 1 else "beam"
            ss["beam"] = max(2, url_number(beam))
        else:
            bad("beam", beam, f"use a beam size from 1 to {MAX_BEAM}")
    alpha = qp.get("alpha")
    if alpha is not None:
        try:
            value = float(alpha)
            if not 0.0 <= value <= 5.0:
                raise ValueError
            ss["alpha"] = round(value, 2)
        except ValueError:
            bad("alpha", alpha, "use a length penalty from 0 to 5")
    choose("search", SEARCH_LABELS)
    ss["_url_problems"] = problems


def url_number(value: str) -> int:
    """A URL parameter as a small whole number (1 to 6 ASCII digits), or -1: "²", "1e9" or 5,000 digits are no
    number (``str.isdigit`` accepts "²", which ``int`` then refuses)."""
    return int(value) if re.fullmatch(r"[0-9]{1,6}", value) else -1


def url_state() -> dict[str, str]:
    """The query parameters that reproduce the current view (defaults left out)."""
    ss = st.session_state
    params = {"sentence": ss.get("sentence", ""), "model": ss.get("model", "")}
    if ss.get("target"):
        params["target"] = ss["target"]
    for key in ("view", "kind", "layer", "head"):
        params[key] = str(ss.get(key, DEFAULTS[key]))
    if ss.get("level", DEFAULTS["level"]) != DEFAULTS["level"]:
        params["level"] = ss["level"]
    beam = 1 if ss.get("decoding") == "greedy" else int(ss.get("beam", DEFAULTS["beam"]))
    if beam != DEFAULTS["beam"]:
        params["beam"] = str(beam)
    if float(ss.get("alpha", DEFAULTS["alpha"])) != DEFAULTS["alpha"]:
        params["alpha"] = f"{float(ss['alpha']):g}"
    if ss.get("search", DEFAULTS["search"]) != DEFAULTS["search"]:
        params["search"] = ss["search"]
    return params


def sync_url() -> None:
    params = url_state()
    current = {k: st.query_params.get(k) for k in URL_KEYS if k in st.query_params}
    if current != params:
        st.query_params.from_dict(params)


def show_url_problems() -> None:
    problems = st.session_state.pop("_url_problems", None)
    if problems:
        st.warning("Some link parameters could not be used:\n\n" + "\n".join(f"- {p}" for p in problems))


def link_popover() -> None:
    with st.popover("Copy link", icon=":material/link:"):
        query = urlencode(url_state())
        base = st.context.url or ""
        if base and not urlparse(base).path:
            base += "/"
        st.caption("This link reopens this page with this sentence, model and view. Copy it with the copy icon "
                   "that appears at the top right of the box when you point at it.")
        st.code(f"{base}?{query}", language=None, wrap_lines=True)


def _copy_widget(widget_key: str, key: str) -> None:
    st.session_state[key] = st.session_state[widget_key]


def bound(widget, label: str, key: str, *args, **kwargs):
    """Draw `widget` (st.selectbox, st.slider, ...) for the value kept in ``session_state[key]``.

    The widget has its own key (``w_<key>``) and copies its value back on change, so the value survives runs
    where the widget is not drawn (another view or page: Streamlit drops the state of undrawn widgets) and can be
    set by code (a click on the model view sets the layer and head).
    """
    ss = st.session_state
    widget_key = f"w_{key}"
    ss[widget_key] = ss[key]
    return widget(label, *args, key=widget_key, on_change=_copy_widget, args=(widget_key, key), **kwargs)


# --- sidebar -----------------------------------------------------------------------------------------------------
def sidebar(models: list[str]) -> Session | None:
    """Model picker, device badge and decoding settings; loads the model (cached). None if it cannot load."""
    ss = st.session_state
    root = assets_root()
    with st.sidebar:
        bound(st.selectbox, "Model", "model", models, help=f"Every model directory found in {root}",
              format_func=lambda name: f"{name} ({model_languages(str(root), name)})")
        name = ss["model"]
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
        st.caption(f"{cfg.encoder_layers} encoder + {cfg.decoder_layers} decoder layers · {count(cfg.heads, 'head')} · "
                   f"d_model {cfg.d_model} · at most {cfg.max_positions} tokens · search with "
                   f"{model.search_precision} weights, every map and probability in full precision")
        if model.card and st.button("Model card", icon=":material/description:", key="model_card_button",
                                    help="Opens the model card in a wide window"):
            show_card(model.name, model.card)
        st.subheader("Decoding")
        bound(st.radio, "Search", "decoding", ["greedy", "beam"], horizontal=True,
              format_func=lambda v: "Greedy" if v == "greedy" else "Beam search")
        if ss["decoding"] == "beam":
            bound(st.slider, "Beam size", "beam", 2, MAX_BEAM)
        bound(st.slider, "Length penalty α", "alpha", 0.0, 5.0, step=0.1,
              help="GNMT length penalty: higher favours longer translations (0 = none)")
        bound(st.radio, "Search precision", "search", list(SEARCH_LABELS), format_func=SEARCH_LABELS.get,
              help="Which weights beam search runs on. The maps and probabilities are always recomputed in full "
                   "precision for the chosen output, so with int8 a step may show a top candidate other than the "
                   "token the search chose (it is flagged).")
        bound(st.slider, "Top-k candidates per step", "top_k", 1, min(MAX_TOP_K, 20))
        bound(st.checkbox, "Cut sentences longer than the model's maximum", "truncate",
              help=f"Otherwise a sentence above {cfg.max_positions} tokens is refused with a message.")
    beam = 1 if ss["decoding"] == "greedy" else int(ss["beam"])
    return Session(model, str(root), name, stamp, beam, float(ss["alpha"]), int(ss["top_k"]), bool(ss["truncate"]),
                   search)


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


def sentence_form() -> None:
    """Examples, the sentence box, the optional forced target and the Translate button."""
    ss = st.session_state
    ss.setdefault("sentence_input", ss.get("sentence", ""))
    ss.setdefault("target_input", ss.get("target", ""))
    known = trained_domains()
    session = ss.get("_session")
    pair = session.model.languages if session is not None else LanguagePair()
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


def example_domain(sentence: str) -> str:
    return next(domain for domain, group in EXAMPLE_DOMAINS.items() if sentence in group)


def example_label(sentence: str, known: list[str] | None) -> str:
    """The example with its kind of text, and a warning when the current model was not trained on that kind."""
    domain = example_domain(sentence)
    outside = known is not None and domain not in known
    return f"{sentence} · {domain}" + (" (outside this model's training)" if outside else "")


def trained_domains() -> list[str] | None:
    """The kinds of text the current model was trained on, None when its directory does not say."""
    session = st.session_state.get("_session")
    stats = session.model.training_stats if session is not None else None
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


def output_words(trace: AttentionTrace) -> list[WordConfidence]:
    """The translation's words (pieces merged, ``</s>`` left out), each with its least likely piece's probability."""
    words = word_confidences(trace.output_tokens, [step.probability for step in trace.steps])
    return [w for w in words if w.text and w.text != "</s>"]


def confidence_markdown(words: list[WordConfidence]) -> str:
    """The words as Markdown, each highlighted by its probability (below LOW / VERY_LOW_CONFIDENCE)."""
    out = []
    for word in words:
        text = md_escape(word.text)
        if word.probability < VERY_LOW_CONFIDENCE:
            text = f":red-background[{text}]"
        elif word.probability < LOW_CONFIDENCE:
            text = f":orange-background[{text}]"
        out.append(text)
    return " ".join(out)


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
        sentence_form()
    return current_trace(session)


def current_trace(session: Session) -> AttentionTrace | None:
    """The trace of the submitted sentence, or None after showing why there is none."""
    ss = st.session_state
    text = ss.get("sentence", "")
    target = ss.get("target", "") or None
    try:
        check_text(text, "the sentence")
        if target is not None:
            check_text(target, "the target text")
    except ValueError as err:
        message = str(err)
        message = message[0].upper() + message[1:] + "."
        if "empty" in message:
            st.info(message)
        else:
            st.error(message)
        return None
    limit = session.model.config.max_positions
    tokens = len(session.model.tokenizer.encode(text)) + 1
    if tokens > limit and not session.truncate:
        st.error(f"This sentence is {tokens} tokens long; the model reads at most {limit} tokens. Shorten it, or "
                 "tick “Cut sentences longer than the model's maximum” in the sidebar.")
        return None
    if target is not None and len(session.model.tokenizer.encode(target)) + 1 > limit:
        st.error(f"The target text is longer than the model's maximum of {limit} tokens; shorten it.")
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


# --- selection helpers (pure, unit-tested) -----------------------------------------------------------------------
def selected_point(state) -> list | None:
    """customdata of the first selected point of a plotly_chart selection state, or None."""
    try:
        points = state["selection"]["points"]
    except (KeyError, TypeError):
        return None
    if not points:
        return None
    data = points[0].get("customdata")
    return list(data) if isinstance(data, (list, tuple)) else None


def clamp_choice(key: str, options: list, fallback, what: str) -> str | None:
    """Keep session_state[key] within `options`; returns a message when it had to change it."""
    ss = st.session_state
    value = ss.get(key, fallback)
    if value in options:
        ss[key] = value
        return None
    ss[key] = fallback if fallback in options else options[0]
    return f"{what} {value} does not exist here; showing {ss[key]}."


def require_session() -> Session:
    """The sidebar's session, or stop the page with a message (the sidebar shows why the model failed)."""
    session = st.session_state.get("_session")
    if session is None:
        st.error("No model is loaded: pick another model in the sidebar, or see the error shown there.")
        st.stop()
    return session
