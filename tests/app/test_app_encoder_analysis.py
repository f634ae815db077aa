"""The Analyze pages with an encoder open (issue 59, pages part 2), CPU, float32: Ablation, Attention sinks, Head
roles, Attribution, Alignment & rollout and Compare on the BERT and DeBERTa-v3 fixtures; each page's numbers are the
library's, and bad input gets one line."""

from __future__ import annotations

import pytest
from support.app import charts, messages
from support.app_encoders import ENCODERS, encoder_page

import viz_model
from viz_model.analysis import ablate


@pytest.fixture(scope="module")
def loaded(encoder_assets) -> dict[str, viz_model.EncoderModel]:
    return {name: viz_model.load(encoder_assets / name, device="cpu") for name in ENCODERS}


def text_of(model) -> str:
    return f"two young dogs are {model.mask_token} in the snow ."


@pytest.mark.parametrize("name", ENCODERS)
def test_ablation_shows_the_predictions_with_and_without_the_heads(encoders, loaded, name):
    model = loaded[name]
    at = encoder_page("ablation", name, sentence=text_of(model))
    assert [t.value for t in at.title] == ["Ablation"]
    last = model.config.encoder_layers - 1
    result = ablate(model, text_of(model), [("encoder", last, 0)])
    frame = at.dataframe[-1].value
    assert frame["token"].tolist() == result.intact.settings["predictions"][0]["tokens"]
    assert frame["token after"].tolist() == result.ablated.settings["predictions"][0]["tokens"]
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["log P(original filled-in text), every head on"]) == pytest.approx(result.log_prob_intact,
                                                                                          abs=1e-3)
    assert charts(at)  # the grid of heads to click


def test_ablation_without_a_mask_says_so_in_one_line(encoders):
    at = encoder_page("ablation", "bert", sentence="two young dogs are playing in the snow .")
    assert "The text has no mask token" in messages(at)
