"""Streamlit AppTest tests of the Logit lens page (CPU, fp32), with the shipped language model and the shipped
translator: the grid is (blocks + 1) x positions and its last row names the model's own prediction at each position,
one token's curve and the deciding block's attention are drawn, and choosing another cell redraws them; an encoder
is told in one line that the lens does not apply."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from support.app import arr, charts, ok, open_page, titles

import viz_model
from viz_model.modeldir.shipped import DEFAULT_MODEL, SHIPPED_ENCODER, SHIPPED_LANGUAGE_MODEL
from viz_model.plot.figure_style import escape

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PROMPT = "A man in a blue shirt is"
SENTENCE = "Two dogs play in the snow."


@pytest.fixture(autouse=True)
def shipped_models(monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the shipped models


@pytest.fixture(scope="module")
def language_model():
    return viz_model.load(ASSETS / SHIPPED_LANGUAGE_MODEL, device="cpu")


def open_lens(model: str, sentence: str) -> AppTest:
    return open_page("logit_lens", straight=True, timeout=180, beam="1", model=model, sentence=sentence)


def grid_of(at: AppTest) -> tuple[np.ndarray, list[list[str]]]:
    heatmap = charts(at)[0]["data"][0]
    return arr(heatmap["z"]), heatmap["text"]


def test_the_language_models_grid_ends_in_its_own_predictions(language_model):
    at = open_lens(SHIPPED_LANGUAGE_MODEL, PROMPT)
    assert at.title[0].value == "Logit lens"
    ids = language_model.encode(PROMPT)
    z, text = grid_of(at)
    assert z.shape == (language_model.config.decoder_layers + 1, len(ids)) and ((z >= 0) & (z <= 1)).all()
    trace = language_model.trace(PROMPT, 1)
    # the last row: the model's next token at each position (its top candidate, not the prompt's own next token)
    assert text[-1] == [escape(s.top_tokens[0]) for s in trace.steps[:len(ids)]]
    assert titles(at)[0].startswith("Top next token after each block")
    token = at.selectbox(key="w_ll_token")
    assert token.value == trace.output_ids[len(ids) - 1]  # by default the prediction after the prompt is followed
    assert titles(at)[1].startswith(f"{trace.output_tokens[len(ids) - 1]} after position {len(ids) - 1}")
    assert "self-attention from position" in titles(at)[2]
    heads = arr(charts(at)[2]["data"][0]["z"])
    assert heads.shape == (language_model.config.heads, len(ids))  # every head's row, the keys up to the position


def test_choosing_another_cell_redraws_the_curve_and_the_maps(language_model):
    at = open_lens(SHIPPED_LANGUAGE_MODEL, PROMPT)
    at.selectbox(key="w_ll_position").set_value(2).run()
    at.selectbox(key="w_ll_row").set_value(1).run()
    ok(at)
    lens = language_model.logit_lens(PROMPT)
    block = lens.deciding_block(1, 2)
    # the token followed stays the one followed before (the prediction after the prompt) where it is among the new
    # position's candidates (any row's top five), else it becomes the model's own prediction there
    followed, candidates = int(lens.top_ids[-1, -1, 0]), set(lens.top_ids[:, 2].ravel().tolist())
    expected = followed if followed in candidates else int(lens.top_ids[-1, 2, 0])
    assert at.selectbox(key="w_ll_token").value == expected
    pieces = {int(t): piece for row in range(lens.num_rows)
              for t, piece in zip(lens.top_ids[row, 2].tolist(), lens.top_tokens[row][2])}
    assert titles(at)[1].startswith(f"{pieces[expected]} after position 2")
    assert titles(at)[2] == f"Block {block} self-attention from position 2"
    assert arr(charts(at)[2]["data"][0]["z"]).shape[1] == 3


def test_the_translators_decoder_grid_ends_in_its_translation():
    at = open_lens(DEFAULT_MODEL, SENTENCE)
    trace = viz_model.load(ASSETS / DEFAULT_MODEL, device="cpu").trace(SENTENCE, beam=1)
    z, text = grid_of(at)
    assert z.shape == (trace.num_layers["decoder"] + 1, len(trace.target_ids))
    assert text[-1] == [escape(t) for t in trace.output_tokens]  # the decoder's last row: its own choice at each step
    assert any("cross-attention from position" in t for t in titles(at))


def test_an_encoder_is_told_in_one_line_that_the_lens_does_not_apply():
    at = open_lens(SHIPPED_ENCODER, "A dog [MASK] in the snow.")
    assert at.title[0].value == "Logit lens"
    assert at.info[0].value.startswith("The logit lens does not apply to an encoder") and not charts(at)
