"""Masks with an encoder open (issue 59), CPU, float32: a padded batch of two texts read in one pass equals each text
read alone and puts no weight on a pad (the library's `padded_batch` and the page's figures and checks), the token
types of a pair, and ModernBERT's local layers' band (its recorded weights are 0 beyond it)."""

from __future__ import annotations

import numpy as np
import pytest
from support.app import arr, charts, messages, titles
from support.app_encoders import ENCODERS, encoder_page

import viz_model
from viz_model.lessons.encoder_masks import layer_bands, padded_batch


@pytest.fixture(scope="module")
def loaded(encoder_assets) -> dict[str, viz_model.EncoderModel]:
    return {name: viz_model.load(encoder_assets / name, device="cpu") for name in ENCODERS}


@pytest.fixture(scope="module")
def modernbert_assets(tmp_path_factory):
    """A models folder holding a small random ModernBERT (layers 1 and 3 global, 2 local: a window of ±4)."""
    from support.hf_encoders import build_encoder_folder

    from viz_model.hf.importer import import_model

    root = tmp_path_factory.mktemp("modernbert-assets")
    import_model(str(build_encoder_folder(tmp_path_factory.mktemp("hf"), "modernbert")), root / "modernbert")
    return root


@pytest.mark.parametrize("name", ENCODERS)
def test_a_padded_batch_equals_each_text_read_alone_and_never_attends_a_pad(loaded, name):
    model = loaded[name]
    texts = [f"a {model.mask_token} .", f"two young dogs are {model.mask_token} in the snow ."]
    batch = padded_batch(model, texts)
    lengths = [len(model.encode(text)) for text in texts]
    assert batch.real.sum(axis=1).tolist() == lengths and lengths[0] < lengths[1]
    assert batch.pad_weight() == 0.0
    for row, text in enumerate(texts):
        assert batch.difference(row, model.trace(text).encoder_attentions) < 1e-5
    wrong = [layer + 0.1 for layer in model.trace(texts[0]).encoder_attentions]
    assert batch.difference(0, wrong) > 0.05  # the check can fail


@pytest.mark.parametrize("name", ENCODERS)
def test_the_masks_page_draws_the_padding_and_checks_it(encoders, loaded, name):
    model = loaded[name]
    text, other = f"a {model.mask_token} runs .", "two young dogs are playing in the snow ."
    at = encoder_page("masks", name, sentence=text)
    at.text_input(key="w_m_other").set_value(other).run()
    padding = charts(at)[0]
    lengths = [len(model.encode(text)), len(model.encode(other))]
    assert arr(padding["data"][0]["z"]).reshape(2, -1).sum(axis=1).tolist() == lengths
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Largest weight on a pad key (every layer and head)"]) == 0.0
    assert float(metrics["Max difference from each text read alone"]) < 1e-5
    assert "Every layer of this model sees every key" in messages(at)


def test_the_token_types_of_a_pair_and_a_pair_in_the_batch(encoders, loaded):
    model = loaded["bert"]
    text, pair = "a [MASK] runs .", "the old dog reads"
    at = encoder_page("masks", "bert", sentence=text, pair=pair)
    figure = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Token types"))
    expected = model.trace(text, pair).settings["type_ids"]
    assert arr(figure["data"][0]["z"]).ravel().tolist() == expected and 0 in expected and 1 in expected
    batch = padded_batch(model, [text, "two dogs"], [pair, None])  # the pair read with its token types, padded
    assert batch.real.sum(axis=1).tolist() == [len(expected), len(model.encode("two dogs"))]
    assert batch.difference(0, model.trace(text, pair).encoder_attentions) < 1e-5
    assert float(next(m.value for m in at.metric if m.label == "Max difference from each text read alone")) < 1e-5


def test_modernbert_local_layers_show_their_band(modernbert_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(modernbert_assets))
    model = viz_model.load(modernbert_assets / "modernbert", device="cpu")
    text = "two young dogs are [MASK] in the snow on the beach ."
    at = encoder_page("masks", "modernbert", sentence=text)
    at.selectbox(key="w_m_layer").set_value(2).run()
    n = len(model.encode(text))
    band = layer_bands(model, n)
    assert band[0] is None and band[2] is None and band[1] is not None and not band[1].all()
    window = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Layer 2's mask"))
    assert np.array_equal(arr(window["data"][0]["z"]).reshape(n, n) > 0, band[1])
    assert float(next(m.value for m in at.metric if m.label.startswith("Largest recorded weight outside"))) == 0.0
    assert "The mask layer 2 applies to text #1 (padding AND the window)" in titles(at) or \
        "The mask layer 2 applies to text #2 (padding AND the window)" in titles(at)
