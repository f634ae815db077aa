"""The Attribution page (Analyze) and the heatmap's weights / value-weighted / contributions switch, in AppTest."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import (  # noqa: E402
    arr,  # noqa: E402
    charts,
    messages,
    ok,
    start,
    switch_to,
)

from viz_model.attribution import attribute  # noqa: E402

SENTENCE = "Two dogs play in the snow."


def chart(at, prefix: str) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith(prefix))


@pytest.fixture
def page(tiny):
    at = start(sentence=SENTENCE)
    switch_to(at, "attribution").run()
    return ok(at)


def test_attribution_page_draws_the_library_numbers(page, app_model):
    trace = app_model.trace(SENTENCE, beam=1)
    expected = attribute(app_model, SENTENCE, beam=1, methods=["attention", "value_weighted", "alti", "saliency"])
    share = chart(page, "Where each output token's prediction comes from")
    np.testing.assert_allclose(arr(share["data"][0]["y"]), expected.source_share(), rtol=1e-6)
    np.testing.assert_allclose(arr(share["data"][0]["y"]) + arr(share["data"][1]["y"]), 1.0, rtol=1e-6)
    assert len(share["data"][0]["x"]) == len(trace.output_tokens)
    methods = chart(page, "Why “")
    assert [t["name"] for t in methods["data"]] == ["attention (mean of layers)", "value-weighted attention", "ALTI+",
                                                    "saliency (‖gradient‖)"]
    alti = next(t for t in methods["data"] if t["name"] == "ALTI+")
    row = expected.source_scores("alti")[0]
    np.testing.assert_allclose(arr(alti["y"]), row / np.abs(row).max(), rtol=1e-5)
    matrix = chart(page, "ALTI+: every output token")
    assert arr(matrix["data"][0]["z"]).size == len(trace.output_tokens) * (len(trace.source_tokens)
                                                                          + len(trace.output_tokens))


def test_the_output_token_and_the_matrix_method_follow_the_pickers(page, app_model):
    page.selectbox(key="w_at_output").set_value(2).run()
    assert "(output 2)" in chart(ok(page), "Why “")["layout"]["title"]["text"]
    page.selectbox(key="w_at_matrix").set_value("saliency").run()
    assert chart(ok(page), "saliency (‖gradient‖): every output token")


def shown(at) -> str:
    """Every message and caption of the page."""
    return messages(at) + "\n" + "\n".join(str(c.value) for c in at.caption)


def test_integrated_gradients_show_their_completeness_gap(page, app_model):
    page.multiselect(key="w_at_methods").set_value(["integrated_gradients"]).run()
    ok(page)
    gap = next(m for m in page.metric if m.label.startswith("Integrated gradients: completeness gap"))
    assert gap.value.endswith("%")
    expected = attribute(app_model, SENTENCE, beam=1, methods=["integrated_gradients"])
    note = expected.completeness_note()[0]
    assert note.startswith(f"Integrated gradients used {expected.steps} points") and note in shown(page)
    # fewer points: the page shows what the library says of them (advice only where a setting can help: see
    # test_the_completeness_note_advises_only_what_a_setting_can_do)
    page.slider(key="w_at_steps").set_value(16).run()
    low = attribute(app_model, SENTENCE, beam=1, methods=["integrated_gradients"], steps=16)
    assert low.completeness_note()[0] in shown(ok(page))
    # fixed points: the slider's label says so
    page.selectbox(key="w_at_tolerance").set_value(0.0).run()
    assert "Points on the path" in [s.label for s in ok(page).slider]
    fixed = attribute(app_model, SENTENCE, beam=1, methods=["integrated_gradients"], steps=16, tolerance=0)
    assert fixed.completeness_note()[0] in shown(page)


def test_contrastive_and_bad_foils(page, app_model):
    page.text_input(key="w_at_foil").input("Fahrradständerkatze").run()
    assert "name a single piece" in messages(ok(page))
    piece = app_model.tokenizer.pieces(app_model.tokenizer.encode_target("Katze"))
    if len(piece) == 1:
        page.text_input(key="w_at_foil").input("Katze").run()
        assert chart(ok(page), "Why “") is not None
        assert any("log p(" in c.value for c in page.caption)


def test_a_foil_that_is_the_output_token_itself_is_named(page, app_model):
    trace = app_model.trace(SENTENCE, beam=1)
    output = next(i for i, t in enumerate(trace.output_tokens)
                  if len(app_model.tokenizer.encode_target(t.replace("▁", " ").strip())) == 1)
    page.selectbox(key="w_at_output").set_value(output).run()
    why = len([c for c in charts(ok(page)) if c["layout"]["title"]["text"].startswith("Why “")])
    page.text_input(key="w_at_foil").input(trace.output_tokens[output].replace("▁", " ").strip()).run()
    assert "is the output token itself" in messages(ok(page))
    assert len([c for c in charts(page) if c["layout"]["title"]["text"].startswith("Why “")]) == why  # no contrast


def test_faithfulness_check_and_no_method(page):
    next(b for b in page.button if b.label == "Check by deleting tokens").click().run()
    ok(page)
    curves = chart(page, "Which explanation is faithful")
    names = {t["name"] for t in curves["data"]}
    assert "random tokens" in names and "ALTI+" in names
    assert len(page.dataframe) >= 1
    page.multiselect(key="w_at_methods").set_value([]).run()
    assert "Pick at least one method" in messages(ok(page))


def test_heatmap_switch_draws_value_weighted_and_contributions(tiny, app_model):
    at = ok(start(sentence=SENTENCE, kind="cross", layer="1", head="mean"))
    trace = app_model.trace(SENTENCE, beam=1)
    result = attribute(app_model, SENTENCE, beam=1, methods=["value_weighted", "alti"])
    at.radio(key="w_measure").set_value("value_weighted").run()
    heat = chart(ok(at), "Cross-attention (decoder → encoder): layer 1, mean over heads · value-weighted")
    expected = result.value_weighted["cross"][0].mean(axis=0)
    np.testing.assert_allclose(arr(heat["data"][0]["z"]).reshape(expected.shape), expected, rtol=1e-5)
    at.radio(key="w_measure").set_value("contributions").run()
    heat = chart(ok(at), "Cross-attention (decoder → encoder): layer 1 · ALTI contributions")
    z = arr(heat["data"][0]["z"]).reshape(len(trace.target_tokens), len(trace.source_tokens) + 1)
    np.testing.assert_allclose(z.sum(axis=1), 1.0, rtol=1e-5)
    assert heat["layout"]["xaxis"]["ticktext"][-1] == "(residual)"
    assert "the head choice does not apply" in " ".join(c.value for c in at.caption)
