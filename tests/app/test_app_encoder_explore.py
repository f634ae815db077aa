"""Fill in the blank & explore with an encoder open (issue 59), on a small random BERT and DeBERTa-v3 (imported;
the `encoder_assets` of the test session), CPU, float32: the fill-in equals `EncoderModel.fill_mask`, the maps equal
the model's trace, a sentence pair's head view draws sentence A to sentence B, and bad input gets one line."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts, messages
from support.app_encoders import ENCODERS, encoder_page

import viz_model
from app import fill_in


@pytest.fixture(scope="module")
def loaded(encoder_assets) -> dict[str, viz_model.EncoderModel]:
    return {name: viz_model.load(encoder_assets / name, device="cpu") for name in ENCODERS}


@pytest.mark.parametrize("name", ENCODERS)
def test_the_fill_in_equals_fill_mask_and_the_heatmap_the_trace(encoders, loaded, name):
    model = loaded[name]
    text = f"two dogs {model.mask_token} in the snow ."
    at = encoder_page(None, name, sentence=text)
    assert [t.value for t in at.title] == ["Fill in the blank & explore"]
    frame = at.dataframe[0].value
    expected = model.fill_mask(text, top_k=5)
    assert len(expected) == 1
    assert list(frame["token"]) == [token for token, _ in expected[0]]
    assert np.allclose(frame["probability"], [p for _, p in expected[0]], atol=1e-6)
    heatmap = charts(at)[0]["data"][0]
    assert np.allclose(arr(heatmap["z"]), model.trace(text).encoder_attentions[0][0], atol=1e-6)
    p, position = expected[0][0][1], model.mask_positions(model.encode(text))[0]
    assert any(c.value.startswith(f"Filled in at token {position}") and f"{p:.3f}" in c.value
               for c in at.caption)  # under the maps too


def test_an_encoder_opens_on_a_sentence_with_a_mask(encoders, loaded):
    from app.texts import MASKED_EXAMPLES

    text = MASKED_EXAMPLES[0].format(mask="[MASK]")
    at = encoder_page(None, "bert")  # no sentence in the link: the explorer's default, given a mask
    assert at.text_area[0].value == text
    assert list(at.dataframe[0].value["token"]) == [t for t, _ in loaded["bert"].fill_mask(text)[0]]


def test_a_text_without_a_mask_is_drawn_and_says_how_to_add_one(encoders):
    at = encoder_page(None, "bert", sentence="two dogs play in the snow .")
    assert "The text has no mask token: write `[MASK]` where the model should fill in a word" in messages(at)
    assert at.get("plotly_chart")


def test_a_click_on_a_word_masks_it(encoders, loaded):
    at = encoder_page(None, "bert", sentence="two dogs play in the snow .")
    at.get("button_group")[0].set_value(2).run()  # the pills of the words: "play"
    text = "two dogs [MASK] in the snow ."
    assert at.text_area[0].value == text
    assert list(at.dataframe[0].value["token"]) == [t for t, _ in loaded["bert"].fill_mask(text)[0]]


def test_more_masks_than_the_page_lists_names_the_limit(encoders):
    many = " ".join(["[MASK]"] * (fill_in.MAX_MASKS_SHOWN + 2))
    at = encoder_page(None, "bert", sentence=many)
    assert (f"The text has {fill_in.MAX_MASKS_SHOWN + 2} mask tokens; this page lists the predictions at the first "
            f"{fill_in.MAX_MASKS_SHOWN}") in messages(at)
    assert set(at.dataframe[0].value["mask"]) == set(range(1, fill_in.MAX_MASKS_SHOWN + 1))


def test_a_pair_longer_than_the_positions_is_one_line(encoders, loaded):
    long = " ".join(["dog"] * 80)
    at = encoder_page(None, "bert", sentence="a [MASK] runs .", pair=long)
    shown = [e.value for e in at.error]
    assert len(shown) == 1 and "the pair gives" in shown[0] and \
        f"reads at most {loaded['bert'].network.longest}" in shown[0], shown
    assert "\n" not in shown[0] and not at.get("plotly_chart")


def test_the_pair_head_view_draws_sentence_a_to_sentence_b(encoders, loaded):
    model = loaded["bert"]
    text, pair = "a [MASK] runs .", "the old dog reads"
    at = encoder_page(None, "bert", sentence=text, pair=pair, view="head")
    at.radio(key="w_hv_sentences").set_value("ab").run()
    start = len(model.encode(text))
    trace = model.trace(text, pair)
    n = len(trace.source_tokens)
    fig = charts(at)[0]
    tokens = {d["name"]: d for d in fig["data"] if d.get("mode") == "markers+text"}
    assert [c for c in tokens["query tokens"]["customdata"]] == [["query", i] for i in range(start)]
    assert [c for c in tokens["key tokens"]["customdata"]] == [["key", j] for j in range(start, n)]
    assert f"queries 0 to {start - 1}, keys {start} to {n - 1}" in fig["layout"]["title"]["text"]
    assert trace.settings["type_ids"][start:] == [1] * (n - start)


def test_the_model_view_and_one_token_across_layers_are_the_traces(encoders, loaded):
    model = loaded["deberta-v3"]
    text = "two dogs [MASK] in the snow ."
    trace = model.trace(text)
    at = encoder_page(None, "deberta-v3", sentence=text, view="model")
    grid = arr(next(d["z"] for d in charts(at)[0]["data"] if d.get("type") == "heatmap"))
    n = len(trace.source_tokens)  # one map a cell of the grid, a gap of one row and column between them
    assert grid.shape == (2 * n + 1, 4 * n + 3)
    assert np.allclose(grid[:n, :n], trace.encoder_attentions[0][0], atol=1e-6)
    assert np.allclose(grid[n + 1:, 3 * (n + 1):], trace.encoder_attentions[1][3], atol=1e-6)
    at.segmented_control(key="w_view").set_value("focus").run()
    at.selectbox(key="w_focus_token").set_value("q2").run()
    rows = arr(charts(at)[0]["data"][0]["z"])
    assert np.allclose(rows, [layer[0, 2] for layer in trace.encoder_attentions], atol=1e-6)
