"""Streamlit AppTest tests of the shipped models folder (CPU, fp32): the picker lists the shipped language model beside
the translators, the translator stays the default, and the sidebar says which kind of model is open."""

from __future__ import annotations

from support.app import charts, ok, start

from viz_model.modeldir.shipped import DEFAULT_MODEL, SHIPPED_LANGUAGE_MODEL

PROMPT = "A man in a blue shirt is"


def badge(at) -> str:
    return "\n".join(m.value for m in at.sidebar.markdown)


def test_the_picker_lists_the_language_model_beside_the_translators(monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the shipped models
    at = ok(start())
    picker = at.sidebar.selectbox(key="w_model")
    assert {DEFAULT_MODEL, "multi30k-en-de", f"{SHIPPED_LANGUAGE_MODEL} (language model)"} <= set(picker.options)
    assert picker.value == DEFAULT_MODEL and at.title[0].value == "Translate & explore"
    assert "Translation model · CPU" in badge(at) and "Language model" not in badge(at)


def test_the_sidebar_says_a_language_model_is_open(monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)
    at = ok(start(model=SHIPPED_LANGUAGE_MODEL, sentence=PROMPT))
    assert at.title[0].value == "Complete & explore"
    assert "Language model · CPU" in badge(at) and "Translation model" not in badge(at)
    assert charts(at)[0]["data"][0]["type"] == "heatmap"
