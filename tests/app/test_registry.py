"""The page registry (app/registry.py): its navigation lists every page for each kind of model, under the kind's
title; a page that does not apply to a kind says why in one line; only the registry asks which kind is open; every
page's script exists and no two app modules share a file name."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from app import registry

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "app"
KIND_CHECK_LIMIT = 3  # issue 58: at most 3 questions of a model's kind outside the registry and the kinds' modules
MODEL_CLASS = re.compile(r"^(\w*(Language|Translation|Encoder)\w*Model|\w*ModelBase)$")
KIND_QUESTIONS = {"is_language_model", "is_decoder_only", "kind_of"}  # a name or attribute that asks
LANGUAGE_MODEL_ONLY = ("patching",)  # the pages that run a language model alone


def recorded_navigation(monkeypatch, kind: str) -> dict[str, list[SimpleNamespace]]:
    """`registry.navigation(kind)` with st.Page recording its arguments (st.Page needs a running app)."""
    monkeypatch.setattr(registry.st, "Page", lambda target, **kw: SimpleNamespace(target=target, **kw))
    return registry.navigation(kind)


@pytest.mark.parametrize("kind", registry.KINDS)
def test_the_navigation_lists_every_page_once_for_each_kind(monkeypatch, kind):
    nav = recorded_navigation(monkeypatch, kind)
    assert list(nav) == list(registry.SECTIONS)
    listed = [entry for entries in nav.values() for entry in entries]
    assert sorted(e.url_path for e in listed) == sorted(p.url_path for p in registry.PAGES)
    assert len({e.url_path for e in listed}) == len(registry.PAGES) == 15
    assert [e.url_path for e in listed if e.default] == ["explore"]  # the page a link without a path opens
    for entry in listed:
        page = next(p for p in registry.PAGES if p.url_path == entry.url_path)
        assert entry.title == page.title_for(kind) and entry.icon == page.icon
        if page.script(kind) is None:  # its one line why not
            assert (kind == registry.ENCODER or page.key in LANGUAGE_MODEL_ONLY) and callable(entry.target), (
                kind, page.key)
        else:
            assert entry.target == page.script(kind) and (APP_DIR / entry.target).is_file(), entry.target
    if kind == registry.LANGUAGE_MODEL:  # every page applies to a language model
        assert registry.pages_for(kind) == list(registry.PAGES)
    if kind == registry.TRANSLATOR:  # and every page but those that run a language model alone to a translator
        assert [p.key for p in registry.PAGES if p not in registry.pages_for(kind)] == list(LANGUAGE_MODEL_ONLY)


def test_an_encoder_has_explore_and_watch_and_decoding_says_in_one_line_why_not():
    applies = [page.key for page in registry.pages_for(registry.ENCODER)]
    assert applies[0] == "explore" and "watch" in applies and "decoding" not in applies
    reason = registry.BY_KEY["decoding"].draws[registry.ENCODER].reason
    assert reason.startswith("Decoding does not apply to an encoder") and "\n" not in reason


def test_head_patching_says_in_one_line_that_it_runs_a_language_model():
    page = registry.BY_KEY["patching"]
    assert page.section == "Analyze" and page.script(registry.LANGUAGE_MODEL) == \
        "views/patching/patching_language_model.py"
    for kind in (registry.TRANSLATOR, registry.ENCODER):
        reason = page.draws[kind].reason
        assert reason.startswith("Head patching runs a language model") and "\n" not in reason


def test_the_navigation_names_explore_as_the_kind_does_it(monkeypatch):
    titles = {kind: next(e.title for e in recorded_navigation(monkeypatch, kind)["Explore"] if e.default)
              for kind in registry.KINDS}
    assert titles == {registry.TRANSLATOR: "Translate & explore", registry.LANGUAGE_MODEL: "Complete & explore",
                      registry.ENCODER: "Fill in the blank & explore"}


def test_a_page_that_does_not_apply_to_a_kind_says_why_in_one_line(monkeypatch):
    page = registry.Page("decoding", "Decoding step by step", ":material/account_tree:", "decoding", "Learn",
                         {registry.TRANSLATOR: "views/decoding/decoding_translator.py",
                          registry.LANGUAGE_MODEL: registry.NotApplicable("Decoding does not apply to an encoder.")})
    monkeypatch.setattr(registry.st, "Page", lambda target, **kw: SimpleNamespace(target=target, **kw))
    assert page.script(registry.LANGUAGE_MODEL) is None
    assert registry.st_page(page, registry.TRANSLATOR).target == "views/decoding/decoding_translator.py"
    drawn = []
    monkeypatch.setattr(registry.st, "title", lambda text: drawn.append(("title", text)))
    monkeypatch.setattr(registry.st, "info", lambda text: drawn.append(("info", text)))
    entry = registry.st_page(page, registry.LANGUAGE_MODEL)
    assert entry.url_path == "decoding" and entry.title == "Decoding step by step"
    entry.target()
    assert drawn == [("title", "Decoding step by step"), ("info", "Decoding does not apply to an encoder.")]


def test_the_kind_is_asked_of_the_model_interface_in_the_registry():
    from viz_model import EncoderModel, LanguageModel, TranslationModel

    assert registry.kind_of(object.__new__(LanguageModel)) == registry.LANGUAGE_MODEL
    assert registry.kind_of(object.__new__(TranslationModel)) == registry.TRANSLATOR
    assert registry.kind_of(object.__new__(EncoderModel)) == registry.ENCODER
    assert set(registry.SETTINGS) == set(registry.KINDS)


def kind_questions(path: Path) -> list[str]:
    """Where `path` asks which kind of model it holds: an isinstance on a model class, or a name that asks."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            names = [c.attr if isinstance(c, ast.Attribute) else getattr(c, "id", "") for c in classes]
            found += [f"{path.name}:{node.lineno} isinstance {n}" for n in names if MODEL_CLASS.match(n)]
        elif isinstance(node, ast.Attribute) and node.attr in KIND_QUESTIONS:
            found.append(f"{path.name}:{node.lineno} {node.attr}")
        elif isinstance(node, ast.Name) and node.id in KIND_QUESTIONS:
            found.append(f"{path.name}:{node.lineno} {node.id}")
    return found


def test_only_the_registry_asks_which_kind_of_model_is_open():
    asked = [q for path in sorted(APP_DIR.rglob("*.py")) if path.name != "registry.py" for q in kind_questions(path)]
    assert len(asked) <= KIND_CHECK_LIMIT, asked
    assert not [q for q in asked if "isinstance" in q or "is_language_model" in q], asked
    assert kind_questions(APP_DIR / "registry.py"), "the registry asks (the count would miss a renamed check)"


def test_no_app_lm_module_remains_and_no_two_modules_share_a_file_name():
    assert not list(APP_DIR.glob("lm_*.py"))
    app_names = [p.name for p in APP_DIR.rglob("*.py") if p.name != "__init__.py"]
    library = {p.name for p in (ROOT / "viz_model").rglob("*.py")}
    assert not [n for n, count in Counter(app_names).items() if count > 1]
    assert not set(app_names) & library, set(app_names) & library


def test_an_encoder_folder_opens_with_the_encoder_sidebar_and_fill_in_the_blank(tmp_path, monkeypatch):
    """CPU, float32: an encoder-only folder (a tiny random BERT, as its Hugging Face folder) among the models: picking
    it opens the encoder's sidebar and Fill in the blank & explore, with no traceback; the translator beside it still
    opens."""
    from support.app import TINY_MODEL, build_tiny_assets, messages, ok, start
    from support.hf_encoders import build_encoder_folder

    build_tiny_assets(tmp_path)
    build_encoder_folder(tmp_path, "bert")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = ok(start(model="bert"))
    assert not at.sidebar.error, messages(at)
    assert [t.value for t in at.title] == ["Fill in the blank & explore"]
    assert at.sidebar.slider(key="w_top_k").label == "Top-k predictions per mask"
    assert at.get("plotly_chart")
    assert not ok(start(model=TINY_MODEL)).sidebar.error
