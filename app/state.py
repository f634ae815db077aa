"""Session state and the URL: the keys every page shares, reading the shared link on a session's first run and
writing it after every run, and widgets bound to state keys.

Session-state keys: ``model``, ``rule``, ``decoding``, ``beam``, ``alpha``, ``top_k``, ``truncate`` (sidebar);
``sentence``,
``target`` (the submitted text; the form's boxes are ``sentence_input`` / ``target_input``); ``view``, ``kind``,
``layer`` (1-based), ``head`` ("1".."H", "mean", "max"), ``level`` (explorer controls). Each value is drawn by a
widget keyed ``w_<key>`` (see `bound`), so it survives views and pages that do not draw it. The URL (query
parameters sentence, target, model, view, kind, layer, head, rule, beam, alpha, search) is read on a session's first
run and rewritten after every run. The beam and alpha defaults are the search rule's (`search_defaults`): a link
holds them only where they differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlparse

import streamlit as st

from app.texts import EXAMPLES
from viz_model.api import MAX_BEAM, MAX_TOP_K
from viz_model.nn.kinds import KIND_LABELS
from viz_model.plot import attention as figures
from viz_model.search.settings import MAX_LENGTH_PENALTY, RULES

VIEWS = {"heatmap": "Head heatmap", "model": "Model view", "head": "Head view", "focus": "Token focus"}


LEVEL_LABELS = {"piece": "Subword pieces", "word": "Words (pieces merged)"}


DEFAULTS = {"decoding": "beam", "beam": 4, "alpha": 0.6, "top_k": 5, "truncate": False, "view": "heatmap",
            "kind": "encoder", "layer": 1, "head": 1, "level": "piece", "search": "auto", "lang": "", "rule": "auto"}


URL_KEYS = ("sentence", "target", "model", "view", "kind", "layer", "head", "level", "rule", "beam", "alpha",
            "search", "lang", "top_k")


MAX_TOP_K_SHOWN = min(MAX_TOP_K, 20)  # the sidebar's top-k slider
SEARCH_LABELS = {"auto": "Auto (int8 for this project's models on the CPU, else full precision)", "int8": "int8",
                 "fp32": "Full precision (fp32)"}
RULE_LABELS = {"auto": "The model's own", "transformers": "As transformers' generate",
               "project": "This project's (GNMT penalty, OpenNMT stop)"}


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

    def ranged(name: str, high: int, why: str) -> int | None:  # a whole number from 1 to `high`, else named as bad
        value = qp.get(name)
        if value is None:
            return None
        if 1 <= url_number(value) <= high:
            return url_number(value)
        bad(name, value, why)
        return None

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
            ss["head"] = head if head in figures.AGGREGATES else url_number(head)
        else:
            bad("head", head, "use a head number from 1, mean or max")
    choose("level", LEVEL_LABELS)
    choose("rule", RULE_LABELS)
    linked: dict[str, object] = {}  # beam and alpha from the link, applied over the rule's defaults (`search_defaults`)
    beam = ranged("beam", MAX_BEAM, f"use a beam size from 1 to {MAX_BEAM}")
    if beam is not None:
        linked["beam"] = beam
    alpha = qp.get("alpha")
    if alpha is not None:
        try:
            value = float(alpha)
            if not -MAX_LENGTH_PENALTY <= value <= MAX_LENGTH_PENALTY:
                raise ValueError
            linked["alpha"], linked["alpha_text"] = round(value, 2), alpha  # its rule's range: `search_defaults`
        except ValueError:
            bad("alpha", alpha, f"use a length penalty from {-MAX_LENGTH_PENALTY:g} to {MAX_LENGTH_PENALTY:g}")
    ss["_linked_search"] = linked
    choose("search", SEARCH_LABELS)
    top_k = ranged("top_k", MAX_TOP_K_SHOWN, f"use a number of candidates from 1 to {MAX_TOP_K_SHOWN}")
    if top_k is not None:
        ss["top_k"] = top_k
    ss["lang"] = qp.get("lang", "")  # a many-to-many model's target language: checked against the model's codes
    ss["_url_problems"] = problems


def search_defaults(name: str, rule: str, beam: int, alpha: float) -> None:
    """Give the sidebar's beam and alpha the defaults of model `name`'s search `rule` (`beam`, `alpha`) when the
    model or the rule changes (a link's values win on its first run); the link then leaves them out."""
    ss = st.session_state
    if ss.get("_search_defaults_for") != (name, rule):
        linked = ss.pop("_linked_search", {})
        if "alpha" in linked and rule != "transformers" and linked["alpha"] < 0:  # only transformers' may be < 0
            shown = linked["alpha_text"][:60].replace("`", "'")
            ss.setdefault("_url_problems", []).append(
                f"`alpha={shown}` ignored: use a length penalty from 0 to {MAX_LENGTH_PENALTY:g} (from "
                f"{-MAX_LENGTH_PENALTY:g} with the rule of transformers)")
            del linked["alpha"]
        values = {"beam": beam, "alpha": alpha, **{k: v for k, v in linked.items() if k in ("beam", "alpha")}}
        ss["decoding"] = "greedy" if values["beam"] == 1 else "beam"
        ss["beam"], ss["alpha"] = max(2, int(values["beam"])), float(values["alpha"])
        ss["_search_defaults_for"] = (name, rule)
    ss["_search_defaults"] = {"beam": beam, "alpha": alpha}


def rule_choice(model_rule: str) -> str:
    """The search rule the sidebar asks for: its radio's value, "auto" being the model's own (`model_rule`)."""
    chosen = st.session_state.get("rule", "auto")
    return model_rule if chosen not in RULES else chosen


def head_options(heads: int) -> list[int | str]:
    """What a head picker offers: heads 1..H (integers, as state holds them), then "mean" and "max"."""
    return [*range(1, heads + 1), *figures.AGGREGATES]


def head_label(value: int | str, heads: int) -> str:
    """A head picker's label: "Head 2 of 8", "Mean over heads"."""
    return f"Head {value} of {heads}" if isinstance(value, int) else f"{value.title()} over heads"


def head_index(value: int | str) -> figures.Head:
    """The library's head reference (0-based index, "mean" or "max") of a head held in state (1-based)."""
    return value - 1 if isinstance(value, int) else value


def state_head(head: figures.Head) -> int | str:
    """The state value (1-based, or "mean" / "max") of a library head reference."""
    return int(head) + 1 if not isinstance(head, str) else head


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
    if ss.get("rule", DEFAULTS["rule"]) != DEFAULTS["rule"]:
        params["rule"] = ss["rule"]
    defaults = ss.get("_search_defaults", DEFAULTS)  # the rule's (set by the sidebar)
    beam = 1 if ss.get("decoding") == "greedy" else int(ss.get("beam", defaults["beam"]))
    if beam != defaults["beam"]:
        params["beam"] = str(beam)
    if float(ss.get("alpha", defaults["alpha"])) != float(defaults["alpha"]):
        params["alpha"] = f"{float(ss['alpha']):g}"
    if ss.get("search", DEFAULTS["search"]) != DEFAULTS["search"]:
        params["search"] = ss["search"]
    if int(ss.get("top_k", DEFAULTS["top_k"])) != DEFAULTS["top_k"]:
        params["top_k"] = str(ss["top_k"])
    if ss.get("lang"):
        params["lang"] = ss["lang"]
    return params


def sync_url() -> None:
    params = url_state() | page_params()
    current = {k: st.query_params.get(k) for k in st.query_params}
    if current != params:
        st.query_params.from_dict(params)


# --- a page's own settings in the link ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Linked:
    """One setting of a page in the shared link: its URL name, how a URL value becomes the state's value (a
    `ValueError` saying what is allowed when it cannot), and back."""

    name: str
    parse: Callable[[str], Any]
    format: Callable[[Any], str] = str


def page_link(settings: dict[str, Linked]) -> None:
    """Put this page's settings (state key -> `Linked`) into the link: on the page's first run in a session, a value
    the link holds goes into session state (before the page draws its widgets; a bad one is reported); every run
    then writes them into the link (`sync_url`), so that a link restores everything the page shows."""
    ss = st.session_state
    read = ss.setdefault("_page_links_read", set())
    problems = []
    for key, linked in settings.items():
        if key in read:
            continue
        read.add(key)
        raw = st.query_params.get(linked.name)
        if raw is None:
            continue
        try:
            ss[key] = linked.parse(raw)
        except ValueError as err:
            problems.append(f"`{linked.name}={raw[:60].replace('`', chr(39))}` ignored: {err}")
    if problems:
        st.warning("Some link parameters could not be used:\n\n" + "\n".join(f"- {p}" for p in problems))
    ss["_page_link_settings"] = settings
    sync_url()  # now too: a page that stops early (st.stop) never reaches the frame's sync at the end of the run

def page_params() -> dict[str, str]:
    """The link parameters of the page drawn in this run (`page_link`); none when it registered none."""
    ss = st.session_state
    settings: dict[str, Linked] = ss.get("_page_link_settings") or {}
    return {linked.name: linked.format(ss[key]) for key, linked in settings.items() if key in ss}


def forget_page_link() -> None:
    """At the start of a run: the page about to be drawn registers its own settings (the last page's drop out)."""
    st.session_state["_page_link_settings"] = {}


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """A `Linked.parse` for a whole number from `low` to `high`."""
    def parse(raw: str) -> int:
        value = url_number(raw)
        if not low <= value <= high:
            raise ValueError(f"use a whole number from {low} to {high}")
        return value
    return parse


def one_of(options) -> Callable[[str], Any]:
    """A `Linked.parse` for one of `options` (matched by their text)."""
    by_text = {str(option): option for option in options}

    def parse(raw: str) -> Any:
        if raw not in by_text:
            raise ValueError(f"use one of {', '.join(by_text)}")
        return by_text[raw]
    return parse


def number(low: float, high: float) -> Callable[[str], float]:
    """A `Linked.parse` for a finite number from `low` to `high`."""
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not low <= value <= high:  # NaN fails too
            raise ValueError(f"use a number from {low:g} to {high:g}")
        return value
    return parse


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
