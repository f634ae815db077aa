"""The page registry: every page's key, title, icon, link path and section, and for each kind of model the script
that draws it (or the one line saying why it does not apply). The only module of the app that asks which kind of
model is open (`kind_of`)."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

import streamlit as st

from app import sidebar
from app.sessions import ModelRef, Session
from viz_model.kinds.base import ModelKind

TRANSLATOR, LANGUAGE_MODEL, ENCODER = "translator", "language_model", "encoder"
KINDS = (TRANSLATOR, LANGUAGE_MODEL, ENCODER)
NO_MODEL = "views/no_model.py"  # the one page when no model directory exists
SECTIONS = ("Explore", "Analyze", "Learn")


@dataclass(frozen=True)
class NotApplicable:
    """What a page that does not apply to a kind of model says instead, in one line."""

    reason: str


@dataclass(frozen=True)
class Page:
    """One page: `draws` maps each kind to its script (relative to app/) or to why it does not apply; `title` is the
    navigation's, or one per kind where they differ."""

    key: str
    title: str | dict[str, str]
    icon: str
    url_path: str
    section: str
    draws: dict[str, str | NotApplicable]

    def title_for(self, kind: str) -> str:
        return self.title if isinstance(self.title, str) else self.title[kind]

    def script(self, kind: str) -> str | None:
        """The script drawing this page for `kind` (None: the page does not apply to it)."""
        drawn = self.draws[kind]
        return None if isinstance(drawn, NotApplicable) else drawn


NOT_APPLICABLE = {  # page key -> kind -> why it does not apply, in one line
    "decoding": {ENCODER: "Decoding does not apply to an encoder: it reads the whole text at once and fills in its "
                          "masks in one pass, with no output written token by token."},
    "logit_lens": {ENCODER: "The logit lens does not apply to an encoder: it reads the residual stream of a model "
                            "that writes text token by token (a language model, a translator's decoder)."},
    "patching": dict.fromkeys((TRANSLATOR, ENCODER), "Head patching runs a language model: open one (decoder-only) "
                              "to patch its heads from a clean prompt's run into a corrupted one's.")}


def _per_kind(folder: str) -> dict[str, str | NotApplicable]:
    """A page with a script per kind (views/FOLDER/FOLDER_translator.py, FOLDER_language_model.py, ...), except the
    kinds `NOT_APPLICABLE` gives its one line why not."""
    lines = NOT_APPLICABLE.get(folder, {})
    return {kind: NotApplicable(lines[kind]) if kind in lines else f"views/{folder}/{folder}_{kind}.py"
            for kind in KINDS}


def _shared(folder: str) -> dict[str, str | NotApplicable]:
    """A page whose one script serves every kind: views/FOLDER/FOLDER_shared.py."""
    return dict.fromkeys(KINDS, f"views/{folder}/{folder}_shared.py")


PAGES = (
    Page("explore", {TRANSLATOR: "Translate & explore", LANGUAGE_MODEL: "Complete & explore",
                     ENCODER: "Fill in the blank & explore"}, ":material/translate:", "explore", "Explore",
         _per_kind("explore")),
    Page("masks", "Masks", ":material/visibility_off:", "masks", "Explore", _per_kind("masks")),
    Page("attribution", "Attribution", ":material/insights:", "attribution", "Analyze", _per_kind("attribution")),
    Page("head_roles", "Head roles", ":material/category:", "head-roles", "Analyze", _per_kind("head_roles")),
    Page("ablation", "Ablation", ":material/block:", "ablation", "Analyze", _per_kind("ablation")),
    Page("patching", "Head patching", ":material/swap_horiz:", "head-patching", "Analyze", _per_kind("patching")),
    Page("alignment", "Alignment & rollout", ":material/join_inner:", "alignment", "Analyze", _per_kind("alignment")),
    Page("compare", "Compare", ":material/compare:", "compare", "Analyze", _per_kind("compare")),
    Page("sinks", "Attention sinks", ":material/vertical_align_bottom:", "sinks", "Analyze", _per_kind("sinks")),
    Page("logit_lens", "Logit lens", ":material/layers:", "logit-lens", "Analyze", _per_kind("logit_lens")),
    Page("positional", "Positional encoding", ":material/timeline:", "positional", "Learn", _per_kind("positional")),
    Page("by_hand", "Attention by hand", ":material/calculate:", "attention-by-hand", "Learn", _per_kind("by_hand")),
    Page("decoding", "Decoding step by step", ":material/account_tree:", "decoding", "Learn", _per_kind("decoding")),
    Page("training", "The training recipe", ":material/model_training:", "training", "Learn", _per_kind("training")),
    Page("watch", "Watch attention form", ":material/play_circle:", "watch", "Learn", _shared("watch")),
)
BY_KEY = {page.key: page for page in PAGES}
_RUN_PAGES: ContextVar[dict[str, st.Page]] = ContextVar("viz_model_pages")  # this run's navigation
DEFAULT = "explore"  # the page a link without a path opens


def kind_of(model: ModelKind) -> str:
    """The kind of `model` (its interface's `kind`): the one place the app asks."""
    return model.kind


SETTINGS: dict[str, Callable[[object, ModelRef], Session]] = {
    TRANSLATOR: sidebar.translator_settings, LANGUAGE_MODEL: sidebar.language_model_settings,
    ENCODER: sidebar.encoder_settings}


def open_model(models: list[str]) -> tuple[str, Session | None]:
    """The sidebar: the model picked, its kind and its kind's settings (the session; None where it cannot load:
    the translator's navigation then)."""
    picked = sidebar.pick_model(models)
    if picked is None:
        return TRANSLATOR, None
    kind = kind_of(picked[0])
    with st.sidebar:
        return kind, SETTINGS[kind](*picked)


def link_path(page: Page) -> str:
    """The page's path in a link: "" for the page the app opens on."""
    return "" if page.key == DEFAULT else page.url_path


def pages_for(kind: str) -> list[Page]:
    """The pages that apply to `kind` (those drawn by a script of theirs), in the registry's order."""
    return [page for page in PAGES if page.script(kind) is not None]


def script(key: str, kind: str) -> str | None:
    """The script of page `key` for `kind`, relative to app/ (None: the page does not apply)."""
    return BY_KEY[key].script(kind)


def _not_applicable(title: str, reason: str) -> Callable[[], None]:
    def not_applicable() -> None:
        st.title(title)
        st.info(reason)
    return not_applicable


def st_page(page: Page, kind: str) -> st.Page:
    """The navigation's entry of `page` for `kind`: its script, or its one line where it does not apply."""
    drawn = page.draws[kind]
    target = _not_applicable(page.title_for(kind), drawn.reason) if isinstance(drawn, NotApplicable) else drawn
    return st.Page(target, title=page.title_for(kind), icon=page.icon, url_path=page.url_path,
                   default=page.key == DEFAULT)


def navigation(kind: str) -> dict[str, list[st.Page]]:
    """Every page by section, for `kind` (kept for this run's `page_link`)."""
    pages = {page.key: st_page(page, kind) for page in PAGES}
    _RUN_PAGES.set(pages)
    return {section: [pages[page.key] for page in PAGES if page.section == section] for section in SECTIONS}


def page_link(key: str, label: str, icon: str) -> None:
    """A link to page `key` as this run's navigation holds it (the script of the kind open)."""
    st.page_link(_RUN_PAGES.get()[key], label=label, icon=icon)
