"""Streamlit AppTest tests of Head patching with the shipped language model open (CPU, fp32): the grid draws what
`viz_model.analysis.head_patching.restored_by_head` computes on the same model and pair, a head picked shows its maps
in both runs, a pair of different token counts and an answer of two tokens are refused in one line each, and a
translator is told in one line that the page runs a language model."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts, messages, ok, open_page, titles

import viz_model
from viz_model.analysis import head_patching, lm_head_roles
from viz_model.analysis.prompt_pairs import BY_KEY, PROMPT_PAIRS, fitting
from viz_model.modeldir.shipped import ASSETS_DIR, DEFAULT_MODEL, SHIPPED_LANGUAGE_MODEL

GRID = "Share of the logit difference each head restores"


@pytest.fixture(scope="module")
def lm():
    return viz_model.load(ASSETS_DIR / SHIPPED_LANGUAGE_MODEL, device="cpu")


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)


def patching_page():
    return open_page("patching", model=SHIPPED_LANGUAGE_MODEL, sentence="A dog runs", beam="1", new_tokens="1")


def figure(at, title: str) -> dict:
    (fig,) = [c for c in charts(at) if c["layout"]["title"]["text"] == title]
    return fig


def test_the_grid_draws_every_head_s_restored_share_on_the_first_pair(shipped, lm):
    at = patching_page()
    assert at.title[0].value == "Head patching"
    pair = PROMPT_PAIRS[0]
    answer, wrong = head_patching.answer_tokens(lm, pair.clean, pair.corrupted)
    found = head_patching.restored_by_head(lm, pair.clean, pair.corrupted, answer, wrong)
    assert found.restored.shape == (lm.config.decoder_layers, lm.num_heads) and np.ptp(found.restored) > 0.01
    np.testing.assert_allclose(arr(figure(at, GRID)["data"][0]["z"]), found.restored, atol=1e-6)
    assert f"{lm.tokenizer.piece(answer)} / {lm.tokenizer.piece(wrong)}" in [m.value for m in at.metric]
    layer, head = np.unravel_index(int(np.argmax(found.restored)), found.restored.shape)  # drawn by default
    maps = figure(at, f"Layer {layer + 1}, head {head + 1} in both runs")
    clean = lm_head_roles.sequence_maps(lm, found.clean_ids)[layer][head]
    corrupted = lm_head_roles.sequence_maps(lm, found.corrupted_ids)[layer][head]
    np.testing.assert_allclose(arr(maps["data"][0]["z"]), clean, atol=1e-6)
    np.testing.assert_allclose(arr(maps["data"][1]["z"]), corrupted, atol=1e-6)
    at.selectbox(key="w_pat_head").set_value((0, 1)).run()
    assert titles(ok(at))[-1] == "Layer 1, head 2 in both runs"
    maps = figure(at, "Layer 1, head 2 in both runs")
    np.testing.assert_allclose(arr(maps["data"][1]["z"]), lm_head_roles.sequence_maps(lm, found.corrupted_ids)[0][1],
                               atol=1e-6)


def test_a_typed_answer_and_a_pair_of_other_token_counts_are_refused_in_one_line(shipped, lm):
    at = patching_page()
    at.text_input(key="w_pat_answer").input("snowy grass").run()
    said = messages(ok(at))
    assert "a logit difference compares single tokens" in said and "\n" not in said
    at.selectbox(key="w_pat_pair").set_value("capital").run()  # 8 and 9 tokens in this model's tokenizer
    assert at.text_input(key="w_pat_clean").value == BY_KEY["capital"].clean
    assert at.text_input(key="w_pat_answer").value == ""  # the pair's own top tokens again
    said = messages(ok(at))
    assert "the same token count" in said and "\n" not in said and GRID not in titles(at)
    at.text_input(key="w_pat_corrupted").input("The capital of Spain is").run()
    assert at.selectbox(key="w_pat_pair").value == "own" and GRID in titles(ok(at))


def test_the_page_opens_on_the_first_pair_the_tokenizer_splits_evenly_and_marks_the_others():
    """A tokenizer that splits the first shipped pair unevenly (here: one token a character) opens on the first pair
    it splits evenly, and the picker marks the others; `fitting` keeps exactly the even pairs."""
    even = fitting(len)
    assert [pair.key for pair in even] == [pair.key for pair in PROMPT_PAIRS if len(pair.clean) == len(pair.corrupted)]
    assert PROMPT_PAIRS[0] not in even and even  # "dogs" / "girls": the first pair is uneven by characters
    assert {pair.key for pair in fitting(lambda text: len(text.split()))} == set(BY_KEY)  # every pair: one word changed


def test_the_shipped_model_opens_on_a_pair_it_splits_evenly(shipped, lm):
    at = patching_page()
    chosen = BY_KEY[at.selectbox(key="w_pat_pair").value]
    assert len(lm.encode(chosen.clean)) == len(lm.encode(chosen.corrupted)) and GRID in titles(ok(at))
    uneven = [o for o in at.selectbox(key="w_pat_pair").options if o.endswith("(token counts differ for this model)")]
    assert uneven == [BY_KEY[p.key].label + " (token counts differ for this model)" for p in PROMPT_PAIRS
                      if len(lm.encode(p.clean)) != len(lm.encode(p.corrupted))]


def test_a_translator_is_told_in_one_line_that_the_page_runs_a_language_model(shipped):
    at = open_page("patching", straight=True, model=DEFAULT_MODEL, sentence="A dog runs.", beam="1")
    assert at.title[0].value == "Head patching"
    assert [i.value for i in at.info] == ["Head patching runs a language model: open one (decoder-only) to patch its "
                                          "heads from a clean prompt's run into a corrupted one's."]
