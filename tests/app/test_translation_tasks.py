"""The explorer's sidebar on t5-small's published config and tokenizer (three translation tasks, small random weights;
`tests/fixtures/t5-bart`): it lists the model's tasks and switches between them, and the task prefix the sentence is
read with changes with the task (CPU, the model's own full-precision search)."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("transformers")
from support.app import TINY_MODEL, charts, messages, ok, start  # noqa: E402
from support.published import build_published_folder  # noqa: E402

from viz_model.hf.importer import import_model  # noqa: E402

SENTENCE = "A man reads a book."
PREFIXES = {"de": "translate English to German: ", "fr": "translate English to French: ",
            "ro": "translate English to Romanian: "}


@pytest.fixture(scope="module")
def t5_assets(tmp_path_factory, assets):
    """An assets folder with t5-small imported as `viz-model import` imports it (its first task) and the tiny model."""
    root = tmp_path_factory.mktemp("t5-assets")
    shutil.copytree(assets / TINY_MODEL, root / TINY_MODEL)
    import_model(str(build_published_folder("t5-small", tmp_path_factory.mktemp("hf") / "t5-small")), root / "t5")
    return root


def source_tokens(at) -> str:
    """The tick labels of every chart on the page: the source's pieces among them."""
    return "\n".join(str(axis.get("ticktext", "")) for chart in charts(at) for name, axis in chart["layout"].items()
                     if name.startswith(("xaxis", "yaxis")))


def test_the_sidebar_lists_the_tasks_and_switches_the_prefix(t5_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(t5_assets))
    at = ok(start(sentence=SENTENCE, model="t5"))
    task = at.selectbox(key="w_lang")
    assert task.label == "Translation task" and task.options == [
        "English to German, as imported", "English to French", "English to Romanian"]
    assert at.text_input(key="w_prefix").value == PREFIXES["de"]
    task.set_value("fr").run()
    ok(at)
    assert at.text_input(key="w_prefix").value == PREFIXES["fr"] and at.query_params["lang"] == "fr"
    assert "▁French" in source_tokens(at) and "▁German" not in source_tokens(at)  # the prefix's pieces are read
    # a prefix typed for one task is dropped when the task changes: the new task's own is shown
    at.text_input(key="w_prefix").input("summarize: ").run()
    assert ok(at).text_input(key="w_prefix").value == "summarize: "
    at.selectbox(key="w_lang").set_value("ro").run()
    assert ok(at).text_input(key="w_prefix").value == PREFIXES["ro"]
    at.selectbox(key="w_lang").set_value("").run()
    assert ok(at).text_input(key="w_prefix").value == PREFIXES["de"]


def test_a_link_opens_a_task_and_a_task_the_model_lacks_is_said(t5_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(t5_assets))
    at = ok(start(sentence=SENTENCE, model="t5", lang="ro"))
    assert at.selectbox(key="w_lang").value == "ro" and at.text_input(key="w_prefix").value == PREFIXES["ro"]
    at = ok(start(sentence=SENTENCE, model="t5", lang="es"))
    assert "`lang=es` ignored: not one of this model's 3 translation tasks." in messages(at)
    assert at.text_input(key="w_prefix").value == PREFIXES["de"]


def test_a_model_without_tasks_shows_no_task_picker(t5_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(t5_assets))
    at = ok(start(sentence=SENTENCE, model=TINY_MODEL))
    assert not [s for s in at.selectbox if s.key == "w_lang"]
