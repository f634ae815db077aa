"""A language model's trace records its maps while it decodes (issue 51, Performance): each cached call's rows (the
prompt's, then one per new token), no second pass over prompt + continuation. fp32 on the CPU, small random models
of the families whose attention differs (learned positions, grouped-query RoPE, a sliding window, ALiBi, soft caps):
the maps and probabilities equal one recorded pass over the whole text, the continuation `continue_ids`'."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.hf_lm import build_lm_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.hf.importer import import_model  # noqa: E402

PROMPTS = sentences(WORDS_EN, 12, 51)


@pytest.fixture(scope="module", params=["gpt2", "llama", "mistral", "bloom", "gemma2"])
def lm(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return viz_model.load(import_model(str(build_lm_folder(root, request.param)), root / "ours"), device="cpu")


def test_the_maps_and_probabilities_equal_one_recorded_pass_over_the_whole_text(lm):
    for prompt in PROMPTS[:4]:
        trace = lm.trace(prompt, max_new_tokens=8)
        ids = torch.tensor([trace.target_ids])
        with torch.inference_mode():
            full = lm.network(ids, need_weights=True)
        n = ids.shape[1]
        assert n > len(lm.encode(prompt))
        for ours, whole in zip(trace.decoder_attentions, full.attentions, strict=True):
            assert ours.shape == (lm.config.heads, n, n)
            assert np.abs(ours - whole[0].numpy()).max() <= 1e-6
            assert not np.triu(ours, 1).any()  # no later key
        probabilities = torch.softmax(full.logits[0], dim=-1)
        for step in trace.steps:
            assert step.probability == pytest.approx(float(probabilities[step.position, step.token_id]), abs=1e-6)
        assert trace.steps[-1].token_id == int(probabilities[-1].argmax())


def test_the_traced_continuation_is_continue_ids(lm):
    for prompt in PROMPTS:
        ids = lm.encode(prompt)
        trace = lm.trace(prompt, max_new_tokens=10)
        assert trace.target_ids == ids + lm.continue_ids(ids, 10)


def test_a_trace_that_meets_the_end_of_text_ends_there_with_its_last_row(lm, monkeypatch):
    prompt = PROMPTS[0]
    ids = lm.encode(prompt)
    first = lm.continue_ids(ids, 1)
    monkeypatch.setattr(lm.tokenizer, "eos_ids", first)  # the first greedy token ends the text
    trace = lm.trace(prompt, max_new_tokens=6)
    assert trace.target_ids == ids + first and len(trace.steps) == len(ids) + 1
    assert all(a[:, -1].sum(-1) == pytest.approx(1.0, abs=1e-5) for a in trace.decoder_attentions)


def test_the_prompt_alone_is_one_recorded_pass(lm):
    trace = lm.trace(PROMPTS[1], max_new_tokens=0)
    n = len(lm.encode(PROMPTS[1]))
    assert len(trace.target_ids) == n and all(a.shape[1:] == (n, n) for a in trace.decoder_attentions)
    assert all(np.allclose(a.sum(-1), 1.0, atol=1e-5) for a in trace.decoder_attentions)


def test_last_logits_and_maps_only_compute_what_a_full_call_does(lm):
    ids = torch.tensor([lm.encode(PROMPTS[2])])
    with torch.inference_mode():
        full = lm.network(ids, need_weights=True)
        last = lm.network(ids, last_logits=True)
        maps = lm.network(ids, need_weights="maps")
    assert last.logits.shape == (1, 1, lm.config.vocab_size)
    assert torch.allclose(last.logits[0, 0], full.logits[0, -1], atol=1e-5)
    assert maps.records == [] and len(maps.maps) == lm.config.decoder_layers
    for ours, whole in zip(maps.attentions, full.attentions, strict=True):
        assert torch.equal(ours, whole)
    with pytest.raises(ValueError, match="need_weights must be False, True, 'maps' or 'recipe', got 'all'"):
        lm.network(ids, need_weights="all")


def test_a_forced_trace_records_the_given_continuation_end_of_text_and_all(lm):
    prompt = PROMPTS[3]
    eos = lm.tokenizer.eos_ids[0]
    forced = [5, eos, 7, 9]  # an end-of-text id inside: forced ids run on past it
    trace = lm.trace(prompt, forced_ids=forced)
    assert trace.target_ids == lm.encode(prompt) + forced and trace.settings["search"] == "forced"
    with torch.inference_mode():
        full = lm.network(torch.tensor([trace.target_ids]), need_weights=True)
    for ours, whole in zip(trace.decoder_attentions, full.attentions, strict=True):
        assert np.abs(ours - whole[0].numpy()).max() <= 1e-6
