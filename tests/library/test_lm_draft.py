"""A language model's greedy continuation drafted by an int8 copy and verified by the full-precision network (issue
51, Performance): the tokens, maps and probabilities are the full-precision network's own, whatever the draft
proposes. fp32 on the CPU, small random models of the families whose attention differs (learned positions,
grouped-query RoPE, a sliding window, ALiBi, soft caps); the draft forced on (``draft="int8"``: too small for
"auto")."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.hf_lm import build_lm_folder, import_lm  # noqa: E402

from viz_model.kinds import language_model  # noqa: E402
from viz_model.nn.causal_lm import CausalLMOutput, maps_block  # noqa: E402
from viz_model.nn.fused import FusedSelfAttention  # noqa: E402
from viz_model.nn.model import HeadMask  # noqa: E402
from viz_model.nn.quantize import Int8Linear, Int8RowBlocks, int8_causal_network  # noqa: E402
from viz_model.on_demand import OnDemandMaps  # noqa: E402
from viz_model.search.causal import DRAFT_SAMPLE, DRAFT_TOKENS, LMSearch, verified_greedy  # noqa: E402

PROMPTS = sentences(WORDS_EN, 6, 52)


@pytest.fixture(scope="module", params=["gpt2", "llama", "qwen2", "bloom", "gemma2"])
def lm(request, tmp_path_factory):
    return import_lm(build_lm_folder(tmp_path_factory.mktemp("hf"), request.param), tmp_path_factory.mktemp("ours"))


def traced(lm, draft: str, prompt: str, **kwargs):
    lm.draft = draft
    try:
        return lm.trace(prompt, **kwargs)
    finally:
        lm.draft = "auto"


def assert_same_trace(ours, plain) -> None:
    assert ours.target_ids == plain.target_ids and ours.output_ids == plain.output_ids
    for a, b in zip(ours.decoder_attentions, plain.decoder_attentions, strict=True):
        assert a.shape == b.shape and np.abs(a - b).max() <= 1e-6
    for a, b in zip(ours.steps, plain.steps, strict=True):
        assert a.probability == pytest.approx(b.probability, abs=1e-6) and a.top_ids == b.top_ids


class WrongAt(torch.nn.Module):
    """A draft that is `network` itself except at the given positions, where it proposes `wrong` (a deliberately
    corrupted draft: where it disagrees with the network is known)."""

    def __init__(self, network, positions: set[int], wrong: int) -> None:
        super().__init__()
        self.network, self.positions, self.wrong, self.proposed = network, positions, wrong, 0

    def forward(self, ids, cache=None, head_mask=None, last_logits=False, **kwargs) -> CausalLMOutput:
        out = self.network(ids, cache=cache, head_mask=head_mask, last_logits=last_logits, **kwargs)
        position = ids.shape[1] + (cache[0].key.shape[2] if cache else 0)  # the position of the token it proposes
        self.proposed += 1
        if position in self.positions:
            out.logits[:, -1] = 0.0
            out.logits[:, -1, self.wrong] = 1.0
        return out


def test_a_drafted_trace_is_the_full_precision_trace(lm):
    for prompt in PROMPTS[:3]:
        assert_same_trace(traced(lm, "int8", prompt, max_new_tokens=12), traced(lm, "off", prompt, max_new_tokens=12))
        ids = lm.encode(prompt)
        lm.draft = "int8"
        drafted = lm.continue_ids(ids, 12)
        lm.draft = "off"
        assert drafted == lm.continue_ids(ids, 12)
    lm.draft = "auto"


def test_a_draft_that_disagrees_at_a_known_step_still_gives_the_networks_continuation(lm, monkeypatch):
    ids = lm.encode(PROMPTS[3])
    plain = traced(lm, "off", PROMPTS[3], max_new_tokens=10)
    expected = plain.target_ids[len(ids):]
    wrong = (expected[3] + 1) % lm.config.vocab_size  # the 4th new token proposed wrong, and the 8th
    draft = WrongAt(lm.network, {len(ids) + 3, len(ids) + 7}, wrong)
    found = verified_greedy(lm.network, draft, ids, 10, lm._choice, lm.tokenizer.eos_ids, record=True)
    assert found.tokens == expected
    assert found.accepted < found.drafted == draft.proposed  # the wrong proposals were cut
    assert found.accepted >= 10 - 2 - 2  # the rest agreed (each cut costs the wrong token and the one after)
    assert all(call.cache == [] for call in found.calls[:-1]) and found.calls[-1].cache  # every key held once
    monkeypatch.setattr(lm, "draft_network", lambda: WrongAt(lm.network, {len(ids) + 3}, wrong))
    assert_same_trace(lm.trace(PROMPTS[3], max_new_tokens=10), plain)
    assert lm.continue_ids(ids, 10) == expected


def test_a_draft_that_is_always_wrong_costs_time_not_tokens(lm, monkeypatch):
    ids = lm.encode(PROMPTS[4])
    plain = traced(lm, "off", PROMPTS[4], max_new_tokens=12)
    for wrong in (0, 5):
        draft = WrongAt(lm.network, set(range(200)), wrong)
        found = verified_greedy(lm.network, draft, ids, 12, lm._choice, lm.tokenizer.eos_ids, record=True)
        assert found.tokens == plain.target_ids[len(ids):]
        # no drafting once DRAFT_SAMPLE went to waste (judged after the round that reaches it); the last run too
        assert DRAFT_SAMPLE <= found.drafted < DRAFT_SAMPLE + DRAFT_TOKENS and found.rounds == 13
        monkeypatch.setattr(lm, "draft_network", lambda draft=draft: draft)
        assert_same_trace(lm.trace(PROMPTS[4], max_new_tokens=12), plain)


def test_a_drafted_trace_ends_at_the_end_of_text_with_its_last_row(lm, monkeypatch):
    prompt = PROMPTS[0]
    ids = lm.encode(prompt)
    new = lm.continue_ids(ids, 12)
    last = next((j for j in range(1, len(new)) if new[j] not in new[:j]), 0)  # a token new here ends the text
    monkeypatch.setattr(lm.tokenizer, "eos_ids", [new[last]])
    lm.draft = "int8"
    trace = lm.trace(prompt, max_new_tokens=12)
    assert lm.continue_ids(ids, 12) == new[:last + 1]
    lm.draft = "auto"
    assert trace.target_ids == ids + new[:last + 1] and len(trace.steps) == len(ids) + last + 1
    assert_same_trace(trace, traced(lm, "off", prompt, max_new_tokens=12))


def test_the_search_settings_and_a_head_mask_apply_to_the_drafted_continuation(lm, monkeypatch):
    monkeypatch.setattr(lm, "search", LMSearch(repetition_penalty=1.5, no_repeat_ngram_size=2))
    heads = torch.ones(lm.config.decoder_layers, lm.config.heads)
    heads[0, 1] = heads[-1, 0] = 0.0
    for mask in (None, HeadMask(decoder=heads)):
        for new in (1, 7):
            assert_same_trace(traced(lm, "int8", PROMPTS[5], max_new_tokens=new, head_mask=mask),
                              traced(lm, "off", PROMPTS[5], max_new_tokens=new, head_mask=mask))


def test_the_draft_switch(lm, monkeypatch):
    assert lm.draft == "auto" and lm.draft_network() is None  # a tiny model: drafting would not pay
    lm.draft = "int8"
    copy = lm.draft_network()
    assert copy is not None and lm.draft_network() is copy  # built once, kept
    lm.draft = "off"
    assert lm.draft_network() is None
    lm.draft = "auto"
    monkeypatch.setattr(language_model, "DRAFT_MIN_PARAMETERS", lm.network.num_parameters())
    assert lm.draft_network() is copy  # at GPT-2-small size "auto" drafts
    with pytest.raises(ValueError, match="draft must be one of auto, int8, off, got 'fast'"):
        lm.draft = "fast"
    assert lm.draft == "auto"


def test_the_int8_copy_shares_all_but_its_linear_layers(lm):
    network = lm.network
    copy = int8_causal_network(network, strict=True)
    assert copy.embedding.weight is network.embedding.weight and copy.final_norm is network.final_norm
    for original, layer in zip(network.layers, copy.layers, strict=True):
        assert isinstance(layer.self_attn, FusedSelfAttention) and isinstance(layer.self_attn.w_qkv, Int8Linear)
        assert layer.attn_residual.norm.weight is original.attn_residual.norm.weight
        assert not isinstance(original.self_attn.w_q, Int8Linear)
    assert isinstance(copy.lm_head, Int8RowBlocks)
    assert network.lm_head is None or not isinstance(network.lm_head, Int8RowBlocks)  # the original as it was
    ids = torch.tensor([lm.encode(PROMPTS[1])])
    with torch.inference_mode():
        ours, full = copy(ids).logits, network(ids).logits
    assert 0 < (ours - full).abs().max() / full.abs().max() < 0.25  # int8 (2 random layers): near, not equal


def test_maps_written_into_a_block_are_the_maps(lm):
    ids = torch.tensor([lm.encode(PROMPTS[2])])
    n = ids.shape[1]
    block = maps_block(lm.network, 1, n, n)
    with torch.inference_mode():
        plain = lm.network(ids, need_weights="maps")
        into = lm.network(ids, need_weights="maps", maps_into=block)
    assert torch.equal(into.logits, plain.logits)
    for ours, theirs, storage in zip(into.maps, plain.maps, block, strict=True):
        assert torch.equal(ours, theirs) and ours.data_ptr() == storage.data_ptr()
    base = block[0].untyped_storage().data_ptr()
    assert all(b.untyped_storage().data_ptr() == base for b in block)  # one block for every layer


def test_a_drafted_trace_with_maps_on_demand_is_the_full_precision_trace(lm, monkeypatch):
    """The draft runs where maps are kept as recipes too (every trace past `FULL_MAPS_MAX_TOKENS`): the verified calls'
    recipes, rejected proposals cut, make the maps the plain full-maps trace holds."""
    ids = lm.encode(PROMPTS[3])
    plain = traced(lm, "off", PROMPTS[3], max_new_tokens=10, maps="full")
    wrong = (plain.target_ids[len(ids) + 3] + 1) % lm.config.vocab_size
    drafts = [lm.draft_network, lambda: WrongAt(lm.network, {len(ids) + 3, len(ids) + 7}, wrong)]
    for index, draft_network in enumerate(drafts):
        lm.draft = "int8"
        draft = draft_network()
        monkeypatch.setattr(lm, "draft_network", lambda draft=draft: draft)
        ours = lm.trace(PROMPTS[3], max_new_tokens=10, maps="on_demand")
        lm.draft = "auto"
        assert isinstance(ours.decoder_attentions, OnDemandMaps)
        assert ours.target_ids == plain.target_ids and ours.output_ids == plain.output_ids
        for a, b in zip(ours.decoder_attentions, plain.decoder_attentions, strict=True):
            assert a.shape == b.shape and np.abs(a - b).max() <= 1e-5
        for a, b in zip(ours.steps, plain.steps, strict=True):
            assert a.probability == pytest.approx(b.probability, abs=1e-6) and a.top_ids == b.top_ids
        if index:
            assert draft.proposed >= 2  # the corrupted draft proposed, and its wrong tokens were cut
