"""The shipped language model (issue 52 item 7), on the CPU in fp32 (its weights are stored in fp16): found and opened
by name offline, a decoder-only RoPE model with grouped-query heads, a full trace of a prompt and its continuation,
and its card's perplexity from its results file. The default model stays the translator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from support.shipped import assert_listed_after_the_default, open_by_name

import viz_model
from viz_model.kinds.language_model import LanguageModel
from viz_model.modeldir.shipped import SHIPPED_LANGUAGE_MODEL, named_model

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = REPO / "assets" / SHIPPED_LANGUAGE_MODEL
PROMPT = "A man in a blue shirt is"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> LanguageModel:
    """The shipped language model, loaded by its name from the repository's assets folder."""
    return open_by_name(SHIPPED_LANGUAGE_MODEL, tmp_path_factory)  # type: ignore[return-value]


def test_it_is_listed_after_the_default_translator(monkeypatch):
    assert_listed_after_the_default(SHIPPED_LANGUAGE_MODEL, monkeypatch)
    assert isinstance(viz_model.load(device="cpu"), viz_model.TranslationModel)  # load() without a path


def test_it_opens_by_name_as_a_decoder_only_rope_model_with_grouped_heads(shipped):
    assert isinstance(shipped, LanguageModel) and shipped.name == SHIPPED_LANGUAGE_MODEL
    cfg = shipped.config
    assert (cfg.kind, cfg.encoder_layers, cfg.positional) == ("decoder", 0, "rope")
    assert 0 < cfg.kv_heads < cfg.heads and cfg.heads % cfg.kv_heads == 0
    with safe_open(DIRECTORY / "model.safetensors", "pt") as weights:
        names = weights.keys()  # a safe_open handle is not iterable
        assert {weights.get_tensor(k).dtype for k in names} == {torch.float16}
        assert {"weights_sha256", "tokenizer_sha256", "config_sha256"} <= set(weights.metadata())


def test_a_name_that_is_no_model_stays_a_path(tmp_path, monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert named_model("no-such-model") == "no-such-model"
    assert named_model(SHIPPED_LANGUAGE_MODEL) == DIRECTORY
    (tmp_path / SHIPPED_LANGUAGE_MODEL).mkdir()  # a folder of that name here wins, as any path does
    assert named_model(SHIPPED_LANGUAGE_MODEL) == SHIPPED_LANGUAGE_MODEL
    with pytest.raises(viz_model.CheckpointError, match="no-such-model: model directory not found"):
        viz_model.load("no-such-model", device="cpu")


def test_trace_maps_the_prompt_and_its_continuation(shipped):
    trace = shipped.trace(PROMPT)
    prompt = trace.settings["prompt_length"]
    new = len(trace.target_ids) - prompt
    assert 1 <= new <= 20 and trace.translation.strip()
    cfg = shipped.config
    assert len(trace.decoder_attentions) == cfg.decoder_layers
    n = len(trace.target_ids)
    for maps in trace.decoder_attentions:
        assert maps.shape == (cfg.heads, n, n)
        np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-4)
        assert not np.triu(maps, k=1).any()  # causal: no query sees a later token
    assert shipped.tokenizer.decode(trace.target_ids[:prompt]).strip() == PROMPT


def test_the_held_out_perplexity_is_in_its_results_file_and_card():
    results = json.loads((DIRECTORY / "results.json").read_text())
    test = results["test_2016_flickr"]
    assert test["lines"] == 1000 and 1 < test["perplexity"] < 4000  # far below a uniform guess over the vocabulary
    assert "| test_2016_flickr |" in (DIRECTORY / "MODEL_CARD.md").read_text()  # the row: test_shipped_figures.py


def test_a_continuation_is_scored_as_it_follows_the_prompt(shipped):
    """`continuation_ids` on a SentencePiece language model: the prompt's ids plus these are the whole text's, and
    the ablation's scorer reads them (it raised AttributeError on this tokenizer)."""
    prompt, continuation = "Two dogs", "are playing in the snow"
    assert shipped.encode(prompt) + shipped.continuation_ids(continuation) == shipped.encode(f"{prompt} {continuation}")
    ids = shipped.encode(f"{prompt} {continuation}")
    logits = shipped.forced_pass(ids).logits[0].detach().float().log_softmax(-1)
    start = len(shipped.encode(prompt))
    expected = sum(float(logits[i - 1, ids[i]]) for i in range(start, len(ids)))
    got = shipped.sequence_log_probs([shipped.encode(prompt)], [shipped.continuation_ids(continuation)])
    assert float(got[0]) == pytest.approx(expected, abs=1e-4)
