"""Session state and the URL: the shared settings read from the link on a session's first run and written into it
after every run (with the drawn page's own, `page_link`), and widgets bound to settings (`bound`).

The declarations (keys, defaults, link parameters and their parsing) are `shared_settings.SHARED` and each page's
dataclass in `page_settings`; this module only moves values between them, session state and the URL. The beam and
alpha defaults are the search rule's (`search_defaults`): a link holds them only where they differ.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable
from urllib.parse import urlencode, urlparse

import streamlit as st

from app.setting_types import PageSettings, Setting, ignored
from app.shared_settings import FORM, HELD, SHARED
from viz_model.plot import map_figures
from viz_model.search.settings import MAX_LENGTH_PENALTY, RULES

URL_KEYS = SHARED.link_names()
_INITIALISED, _URL_PROBLEMS, _LINKED_SEARCH = "_initialised", "_url_problems", "_linked_search"
_SEARCH_DEFAULTS, _SEARCH_DEFAULTS_FOR = "_search_defaults", "_search_defaults_for"
_PAGES_READ, _PAGE_SETTINGS, _RUN_LINK = "_page_links_read", "_page_link_settings", "_run_link"


# --- state and URL -----------------------------------------------------------------------------------------------
def init_state(models: list[str]) -> None:
    """On a session's first run, take the shared settings from the URL (query parameters), reporting bad values."""
    ss = st.session_state
    shared = SHARED.for_models(models)
    if ss.get(_INITIALISED):
        if shared.model.get() not in models:
            shared.model.set(models[0])
        return
    ss[_INITIALISED] = True
    for setting in shared.settings():
        setting.init()
    values, problems = shared.from_link(st.query_params)
    held = {key: values.pop(key) for key in HELD if key in values}  # applied over the rule's defaults
    if "alpha" in held:
        held["alpha_text"] = st.query_params["alpha"]
    ss.update(values)
    ss[_LINKED_SEARCH] = held
    FORM.sentence_box.set(shared.sentence.get())
    FORM.target_box.set(shared.target.get())
    ss[_URL_PROBLEMS] = problems


def search_defaults(name: str, rule: str, beam: int, alpha: float) -> None:
    """Give the sidebar's beam and alpha the defaults of model `name`'s search `rule` (`beam`, `alpha`) when the
    model or the rule changes (a link's values win on its first run); the link then leaves them out."""
    ss = st.session_state
    if ss.get(_SEARCH_DEFAULTS_FOR) != (name, rule):
        linked = ss.pop(_LINKED_SEARCH, {})
        if "alpha" in linked and rule != "transformers" and linked["alpha"] < 0:  # only transformers' may be < 0
            ss.setdefault(_URL_PROBLEMS, []).append(ignored(
                "alpha", linked["alpha_text"], f"use a length penalty from 0 to {MAX_LENGTH_PENALTY:g} (from "
                f"{-MAX_LENGTH_PENALTY:g} with the rule of transformers)"))
            del linked["alpha"]
        values = {"beam": beam, "alpha": alpha, **{k: v for k, v in linked.items() if k in HELD}}
        SHARED.decoding.set("greedy" if values["beam"] == 1 else "beam")
        SHARED.beam.set(max(2, int(values["beam"])))
        SHARED.alpha.set(float(values["alpha"]))
        ss[_SEARCH_DEFAULTS_FOR] = (name, rule)
    ss[_SEARCH_DEFAULTS] = {SHARED.beam.key: beam, SHARED.alpha.key: alpha}


def rule_choice(model_rule: str) -> str:
    """The search rule the sidebar asks for: its radio's value, "auto" being the model's own (`model_rule`)."""
    chosen = SHARED.rule.get()
    return model_rule if chosen not in RULES else chosen


def search_beam() -> int:
    """The beam the sidebar asks for: 1 for greedy search."""
    return 1 if SHARED.decoding.get() == "greedy" else int(SHARED.beam.get())


def url_state() -> dict[str, str]:
    """The query parameters of the shared settings that reproduce the current view (a default only where the link
    always names it)."""
    ss = st.session_state
    return SHARED.to_link(ChainMap({SHARED.beam.key: search_beam()}, ss), ss.get(_SEARCH_DEFAULTS))


def sync_url() -> None:
    params = url_state() | page_params()
    current = {k: st.query_params.get(k) for k in st.query_params}
    if current != params:
        st.query_params.from_dict(params)


def show_url_problems() -> None:
    """The shared settings' link values that could not be used (read by `init_state`), once."""
    _warn(st.session_state.pop(_URL_PROBLEMS, None))


def _warn(problems: list[str] | None) -> None:
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


# --- a page's own settings in the link ----------------------------------------------------------------------------
def page_link(page: PageSettings) -> None:
    """Put this page's linked settings into the link: on the page's first run in a session, the values the link holds
    go into session state (before the page draws its widgets; a bad one is reported); every run then writes them
    into the link (`sync_url`), so that a link restores everything the page shows. A page that draws another's
    settings (a language model's prompt form: Complete & explore's) registers those too: the link holds both."""
    ss = st.session_state
    read = ss.setdefault(_PAGES_READ, set())
    if type(page).__name__ not in read:
        read.add(type(page).__name__)
        values, problems = page.from_link(ss.get(_RUN_LINK, st.query_params))  # as the run found it: an earlier
        ss.update(values)  # page_link of this run may have rewritten the link already
        _warn(problems)
    registered = ss.get(_PAGE_SETTINGS) or []
    if all(type(p) is not type(page) for p in registered):
        ss[_PAGE_SETTINGS] = [*registered, page]
    sync_url()  # now too: a page that stops early (st.stop) never reaches the frame's sync at the end of the run


def page_params() -> dict[str, str]:
    """The link parameters of the settings registered in this run (`page_link`); none when none was."""
    params: dict[str, str] = {}
    for page in st.session_state.get(_PAGE_SETTINGS) or []:
        params |= page.to_link(st.session_state)
    return params


def forget_page_link() -> None:
    """At the start of a run: the page about to be drawn registers its own settings (the last page's drop out); the
    link as the run found it is kept for `page_link` to read."""
    st.session_state[_PAGE_SETTINGS] = None
    st.session_state[_RUN_LINK] = st.query_params.to_dict()


# --- widgets bound to settings -----------------------------------------------------------------------------------
def _copy_widget(widget_key: str, key: str, then: Callable[[], None] | None = None) -> None:
    st.session_state[key] = st.session_state[widget_key]
    if then is not None:
        then()


def bound(widget, label: str, setting: Setting, *args, then: Callable[[], None] | None = None, **kwargs):
    """Draw `widget` (st.selectbox, st.slider, ...) for the value of `setting` kept in session state.

    The widget has its own key (`Setting.widget_key`) and copies its value back on change, so the value survives
    runs where the widget is not drawn (another view or page: Streamlit drops the state of undrawn widgets) and can
    be set by code (a click on the model view sets the layer and head); `then`: called after a change is copied.
    """
    ss = st.session_state
    ss[setting.widget_key] = ss[setting.key]
    return widget(label, *args, key=setting.widget_key, on_change=_copy_widget,
                  args=(setting.widget_key, setting.key, then), **kwargs)


def clamp_choice(setting: Setting, options: list, fallback, what: str) -> str | None:
    """Keep `setting` within `options`; returns a message when it had to change it."""
    value = setting.get(fallback)
    if value in options:
        setting.set(value)
        return None
    setting.set(fallback if fallback in options else options[0])
    return f"{what} {value} does not exist here; showing {setting.get()}."


# --- heads and selections (pure, unit-tested) --------------------------------------------------------------------
def head_options(heads: int) -> list[int | str]:
    """What a head picker offers: heads 1..H (integers, as state holds them), then "mean" and "max"."""
    return [*range(1, heads + 1), *map_figures.AGGREGATES]


def head_label(value: int | str, heads: int) -> str:
    """A head picker's label: "Head 2 of 8", "Mean over heads"."""
    return f"Head {value} of {heads}" if isinstance(value, int) else f"{value.title()} over heads"


def head_index(value: int | str) -> map_figures.Head:
    """The library's head reference (0-based index, "mean" or "max") of a head held in state (1-based)."""
    return value - 1 if isinstance(value, int) else value


def state_head(head: map_figures.Head) -> int | str:
    """The state value (1-based, or "mean" / "max") of a library head reference."""
    return int(head) + 1 if not isinstance(head, str) else head


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
