"""Streamlit AppTest tests of a language model in the app (CPU, fp32): a models folder holding an imported tiny Llama
(grouped-query heads) and the shipped translator; the picker lists both, Complete & explore draws every map, every
other page says in one line that it is for translation models, and switching back to the translator works."""

from __future__ import annotations

import shutil

import pytest
from streamlit.testing.v1 import AppTest
from support.app import APP, charts, messages, ok, start, titles
from support.hf_lm import build_lm_folder, import_lm

from app import completion
from viz_model.modeldir.shipped import DEFAULT_MODEL

LM, GPT2 = "llama", "gpt2"  # GPT-2: a learned table of 128 positions
PROMPT = "a man plays in the snow"
OTHER_PAGES = ["attention_by_hand", "training", "alignment", "attribution"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A models folder: the shipped translator (copied) and a tiny Llama imported with ``viz-model import``."""
    root = tmp_path_factory.mktemp("lm-app-models")
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)
    for family in (LM, GPT2):
        import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), family), root)
    return root


@pytest.fixture
def lm_app(models, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(models))
    return models


def open_lm(sentence: str = PROMPT, **params: str) -> AppTest:
    return ok(start(model=LM, sentence=sentence, **params))


def test_the_picker_lists_both_and_marks_the_language_model(lm_app):
    at = ok(start())
    picker = at.sidebar.selectbox(key="w_model")
    assert set(picker.options) == {DEFAULT_MODEL, f"{LM} (language model)", f"{GPT2} (language model)"}
    assert at.title[0].value == "Translate & explore"


def test_complete_and_explore_continues_the_prompt_and_marks_where_it_ends(lm_app):
    at = open_lm(new_tokens="5")
    assert at.title[0].value == "Complete & explore"
    assert at.slider(key="w_lm_new_tokens").value == 5
    heat = charts(at)[0]
    assert titles(at)[0].startswith("Decoder self-attention")
    assert heat["data"][0]["type"] == "heatmap"
    prompt = len(heat["data"][0]["x"]) - 5  # five new tokens follow the prompt
    lines = [s for s in heat["layout"]["shapes"] if s["line"]["color"] == completion.BOUNDARY_COLOR]
    vertical = [s["x0"] for s in lines if s["xref"] == "x"]
    horizontal = [s["y0"] for s in lines if s["yref"] == "y"]
    assert (vertical, horizontal) == ([prompt - 0.5], [prompt - 0.5])
    sidebar = "\n".join(c.value for c in at.sidebar.caption)
    assert "4 query heads sharing 2 key/value heads" in sidebar
    at.slider(key="w_lm_new_tokens").set_value(7).run()  # the page's own setting goes into the link
    assert at.query_params["new_tokens"] == "7" and len(charts(ok(at))[0]["data"][0]["x"]) == prompt + 7


def test_grouped_heads_are_labelled_by_their_key_value_head(lm_app):
    at = open_lm()
    labels = [at.selectbox(key="w_head").format_func(h) for h in (1, 2, 3, 4)]
    assert labels == ["Head 1 of 4 · key/value head 1", "Head 2 of 4 · key/value head 1",
                      "Head 3 of 4 · key/value head 2", "Head 4 of 4 · key/value head 2"]
    at = open_lm(view="head")
    assert at.multiselect(key="w_hv_heads").options == ["Head 1 · kv 1", "Head 2 · kv 1", "Head 3 · kv 2",
                                                         "Head 4 · kv 2"]


@pytest.mark.parametrize("view", ["model", "head", "focus"])
def test_every_view_draws_the_language_models_maps(lm_app, view):
    at = open_lm(view=view)
    assert charts(at), view


def test_every_other_page_says_it_is_for_translation_models(lm_app):
    for page in OTHER_PAGES:
        at = open_lm()
        at.switch_page(f"views/{page}.py").run()
        ok(at)
        assert "is for translation models for now" in messages(at), page
        assert not at.get("plotly_chart"), page


def test_a_prompt_past_a_learned_tables_positions_is_one_line(lm_app):
    at = ok(start(model=GPT2, sentence=" ".join(["snow"] * 200)))
    assert "cannot be completed" in messages(at) and "this model has 128" in messages(at)
    assert not at.get("plotly_chart")


def test_a_prompt_past_ropes_trained_length_is_warned_and_drawn(lm_app):
    at = open_lm(sentence=" ".join(["snow"] * 70))  # about 4 pieces a word here
    assert "past the 256 this model was trained on" in messages(at)
    assert charts(at)


def test_switching_back_to_the_translator_translates(lm_app):
    at = open_lm()
    at.sidebar.selectbox(key="w_model").set_value(DEFAULT_MODEL).run()
    ok(at)
    assert at.title[0].value == "Translate & explore"
    assert any(m.value == "Translation" for m in at.caption)
    assert titles(at) == ["Decoder self-attention (masked): layer 1, head 1"]  # the kind chosen before, kept
    assert at.selectbox(key="w_kind").options == ["Encoder self-attention", "Decoder self-attention",
                                                  "Cross-attention"]
