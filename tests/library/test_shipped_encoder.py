"""The shipped encoder (issue 59, "What to build" 3), on the CPU in fp32 (its weights are stored in fp16): found and
opened by name offline as an `EncoderModel`, a BERT-shaped masked language model that fills a mask on a caption, a
trace of every layer over [CLS] text [SEP], and its card's held-out masked-token accuracy from its results file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from support.shipped import assert_listed_after_the_default, open_by_name

from viz_model.kinds.encoder import EncoderModel
from viz_model.modeldir.shipped import SHIPPED_ENCODER, named_model

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = REPO / "assets" / SHIPPED_ENCODER
CAPTION = "A man in a blue shirt is [MASK] a guitar."


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> EncoderModel:
    """The shipped encoder, loaded by its name from the repository's assets folder."""
    return open_by_name(SHIPPED_ENCODER, tmp_path_factory)  # type: ignore[return-value]


def test_it_is_listed_after_the_default_translator(monkeypatch):
    assert_listed_after_the_default(SHIPPED_ENCODER, monkeypatch)
    assert named_model(SHIPPED_ENCODER) == DIRECTORY


def test_it_opens_by_name_as_a_bert_shaped_encoder_stored_in_fp16(shipped):
    assert isinstance(shipped, EncoderModel) and shipped.name == SHIPPED_ENCODER
    cfg = shipped.config
    assert (cfg.kind, cfg.decoder_layers, cfg.positional) == ("encoder", 0, "learned")
    assert 2_000_000 < shipped.network.num_parameters() < 3_500_000
    assert next(shipped.network.parameters()).dtype == torch.float32  # computed in full precision
    with safe_open(DIRECTORY / "model.safetensors", "pt") as weights:
        names = weights.keys()
        assert {weights.get_tensor(k).dtype for k in names} == {torch.float16}
        assert {"weights_sha256", "tokenizer_sha256", "config_sha256"} <= set(weights.metadata())


def test_it_fills_a_mask_on_a_caption(shipped):
    [predictions] = shipped.fill_mask(CAPTION, top_k=5)
    words = [word for word, _ in predictions]
    probabilities = [p for _, p in predictions]
    assert len(predictions) == 5 and probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1
    assert "playing" in words, predictions  # what the captions say a man does with a guitar
    two = shipped.fill_mask("Two [MASK] are playing in the [MASK].", top_k=3)
    assert len(two) == 2 and all(len(p) == 3 for p in two)
    with pytest.raises(ValueError, match="no mask token"):
        shipped.fill_mask("A man is playing a guitar.")


def test_trace_maps_every_layer_over_cls_text_sep(shipped):
    trace = shipped.trace(CAPTION)
    cfg = shipped.config
    n = len(trace.source_tokens)
    assert trace.source_tokens[0] == "[CLS]" and trace.source_tokens[-1] == "[SEP]" and "[MASK]" in trace.source_tokens
    assert len(trace.encoder_attentions) == cfg.encoder_layers
    for maps in trace.encoder_attentions:
        assert maps.shape == (cfg.heads, n, n)
        np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-4)


def test_the_held_out_masked_token_accuracy_is_in_its_results_file_and_card():
    results = json.loads((DIRECTORY / "results.json").read_text())
    assert set(results) == {"val", "test_2016_flickr"}
    test = results["test_2016_flickr"]
    assert test["lines"] == 1000 and test["masked"] > 1000
    assert 1 / 4000 < test["top1"] <= test["top5"] < 1  # far above a uniform guess over the vocabulary
    card = (DIRECTORY / "MODEL_CARD.md").read_text()
    assert "top-1" in card and "test_2016_flickr" in card
