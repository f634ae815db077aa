"""The Analyze pages with an encoder open (issue 59, pages part 2), CPU, float32: Ablation, Attention sinks, Head
roles, Attribution, Alignment & rollout and Compare on the BERT and DeBERTa-v3 fixtures; each page's numbers are the
library's, and bad input gets one line."""

from __future__ import annotations

import os

import pytest
from support.app import arr, charts, markdown, messages
from support.app_encoders import ENCODERS, encoder_page

import viz_model
from app.texts import md_escape
from viz_model.analysis import ablate, attention_rollout
from viz_model.analysis.encoder_head_roles import corpus_roles, findings, text_roles
from viz_model.analysis.encoder_sinks import hide_sep, trace_special_shares
from viz_model.analysis.fill_mask_ablation import text_importance
from viz_model.analysis.lm_head_roles import english_corpus
from viz_model.attribution import METHODS, attribute
from viz_model.modeldir.shipped import ASSETS_DIR, SHIPPED_LANGUAGE_MODEL


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
    grid = [fig for fig in charts(at) if fig["layout"]["title"]["text"].startswith("Change of log P")][0]
    change = text_importance(model, text_of(model))["change"].to_numpy().reshape(-1, model.num_heads)
    assert arr(grid["data"][0]["z"]) == pytest.approx(change, abs=1e-5)


def test_ablation_without_a_mask_says_so_in_one_line(encoders):
    at = encoder_page("ablation", "bert", sentence="two young dogs are playing in the snow .")
    assert "The text has no mask token" in messages(at)


@pytest.mark.parametrize("name", ENCODERS)
def test_sinks_draw_the_shares_on_sep_and_cls_and_hiding_sep_moves_the_predictions(encoders, loaded, name):
    model = loaded[name]
    text = text_of(model)
    at = encoder_page("sinks", name, sentence=text)
    shares = trace_special_shares(model, model.trace(text))
    sep, cls = charts(at)[:2]
    assert arr(sep["data"][0]["z"]) == pytest.approx(shares.sep, abs=1e-6)
    assert arr(cls["data"][0]["z"]) == pytest.approx(shares.cls, abs=1e-6)
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Mean share on [SEP]"]) == pytest.approx(shares.sep.mean(), abs=1e-3)
    at.toggle[0].set_value(True).run()
    switch = hide_sep(model, text)
    frame = at.dataframe[-1].value
    assert frame["token"].tolist() == switch.masks[0].intact.tokens
    assert frame["token after"].tolist() == switch.masks[0].switched.tokens
    assert frame["probability after"].tolist() == pytest.approx(switch.masks[0].switched.probabilities, abs=1e-6)
    assert not at.exception


def test_sinks_without_a_mask_draw_the_shares_and_say_why_there_is_no_switch(encoders):
    at = encoder_page("sinks", "bert", sentence="two young dogs are playing in the snow .")
    assert len(charts(at)) >= 2 and "The text has no mask token" in messages(at)


@pytest.mark.parametrize("name", ENCODERS)
def test_head_roles_score_every_head_on_the_corpus_and_on_the_text_and_name_the_findings(encoders, loaded, name):
    model = loaded[name]
    at = encoder_page("head_roles", name, sentence=text_of(model))
    sentences, _ = english_corpus()
    table = corpus_roles(model, sentences)
    (grid,) = charts(at)
    assert arr(grid["data"][0]["z"]) == pytest.approx(table["sep"].to_numpy().reshape(-1, model.num_heads), abs=1e-6)
    shown = at.dataframe[-1].value
    assert shown["layer"].min() == 1 and shown["cls"].to_numpy() == pytest.approx(table["cls"].to_numpy())
    found = findings(table)
    if found:
        assert md_escape(found[0].text[1:]) in markdown(at)
    else:
        assert "No head of this model crosses these thresholds here." in messages(at)
    at.radio[0].set_value("text").run()
    alone = text_roles(model, text_of(model))
    assert arr(charts(at)[0]["data"][0]["z"]) == pytest.approx(alone["sep"].to_numpy().reshape(-1, model.num_heads))
    at.selectbox(key="w_hr_enc_score").set_value("previous_token").run()
    assert arr(charts(at)[0]["data"][0]["z"]) == pytest.approx(
        alone["previous_token"].to_numpy().reshape(-1, model.num_heads))
    assert not at.exception


@pytest.mark.parametrize("name", ENCODERS)
def test_rollout_over_the_encoder_is_the_libraries_and_alignment_says_why_not(encoders, loaded, name):
    model = loaded[name]
    at = encoder_page("alignment", name, sentence=text_of(model))
    assert "Word alignment reads cross-attention" in messages(at)
    maps = model.trace(text_of(model)).encoder_attentions
    drawn = {fig["layout"]["title"]["text"]: arr(fig["data"][0]["z"]) for fig in charts(at)}
    layers = model.config.encoder_layers
    assert drawn[f"Rollout through layers 1–{layers}"] == pytest.approx(attention_rollout(maps)[-1], abs=1e-6)
    assert any(title.startswith("Flow through layers") for title in drawn)


@pytest.mark.parametrize("name", ENCODERS)
def test_attribution_scores_the_text_for_the_prediction_at_the_mask(encoders, loaded, name):
    model = loaded[name]
    text = f"two young {model.mask_token} are {model.mask_token} in the snow ."
    at = encoder_page("attribution", name, sentence=text)
    picked = at.multiselect[0].value
    result = attribute(model, text, methods=[m for m in METHODS if m in picked])
    assert at.selectbox(key="w_at_output").options == [f"{i}: {t}" for i, t in enumerate(result.output_tokens)]
    matrix = [fig for fig in charts(at) if "every output token (rows)" in fig["layout"]["title"]["text"]][0]
    assert arr(matrix["data"][0]["z"]) == pytest.approx(result.source_scores("alti"), abs=1e-6)
    assert result.output_ids == [found["ids"][0] for found in model.trace(text).settings["predictions"]]


def test_attribution_without_a_mask_says_so_in_one_line(encoders):
    at = encoder_page("attribution", "bert", sentence="two young dogs are playing in the snow .")
    assert "The text has no mask token" in messages(at)


def test_compare_puts_the_encoder_beside_a_language_model_on_the_filled_in_sentence(encoder_assets, loaded,
                                                                                     monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", f"{encoder_assets}{os.pathsep}{ASSETS_DIR}")
    model = loaded["bert"]
    at = encoder_page("compare", "bert", sentence=text_of(model))
    assert at.selectbox(key="w_cmp_model").value == SHIPPED_LANGUAGE_MODEL
    filled = model.trace(text_of(model)).translation
    encoder_map, lm_map = charts(at)[:2]
    mean = model.trace(filled).encoder_attentions[-1].mean(axis=0)
    assert arr(encoder_map["data"][0]["z"]) == pytest.approx(mean, abs=1e-5)
    lm = viz_model.load(ASSETS_DIR / SHIPPED_LANGUAGE_MODEL, device="cpu").trace(filled, 0)
    assert arr(lm_map["data"][0]["z"]) == pytest.approx(lm.decoder_attentions[-1].mean(axis=0), abs=1e-5)
    assert "0% of a row's weight lies after the query" in " ".join(c.value for c in at.caption)


def test_compare_without_a_language_model_draws_the_encoder_and_says_so_in_one_line(encoders, loaded):
    text = "two young dogs are playing in the snow ."
    at = encoder_page("compare", "bert", sentence=text)
    assert "No language model is available" in messages(at)
    (drawn,) = charts(at)
    mean = loaded["bert"].trace(text).encoder_attentions[-1].mean(axis=0)
    assert arr(drawn["data"][0]["z"]) == pytest.approx(mean, abs=1e-5)
