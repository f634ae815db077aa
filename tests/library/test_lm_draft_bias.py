"""The int8 draft of a language model whose output projection has a bias (Phi's lm_head): the draft's logits
include it, so they stay within int8 tolerance of the full-precision logits, and the drafted greedy continuation is
the plain one."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.hf_lm import build_lm_folder, import_lm  # noqa: E402

from viz_model.nn.quantize import Int8RowBlocks, int8_causal_network  # noqa: E402

PROMPTS = sentences(WORDS_EN, 3, 60)


@pytest.fixture(scope="module")
def phi(tmp_path_factory):
    lm = import_lm(build_lm_folder(tmp_path_factory.mktemp("hf"), "phi"), tmp_path_factory.mktemp("ours"))
    with torch.no_grad():  # a bias far larger than the logits: a draft without it is far off and picks other tokens
        lm.network.lm_head.bias.copy_(torch.randn(lm.config.vocab_size, generator=torch.Generator().manual_seed(0))
                                      * 4 * lm.network(torch.tensor([lm.encode(PROMPTS[0])])).logits.abs().max())
    return lm


def test_the_draft_of_a_biased_head_adds_its_bias(phi):
    assert phi.network.lm_head.bias is not None and phi.network.lm_head.bias.abs().max() > 0
    draft = int8_causal_network(phi.network, strict=True)
    assert isinstance(draft.lm_head, Int8RowBlocks)
    for prompt in PROMPTS:
        ids = torch.tensor([phi.encode(prompt)])
        with torch.inference_mode():
            ours, full = draft(ids).logits, phi.network(ids).logits
        bias = phi.network.lm_head.bias.abs().max()
        assert (ours - full).abs().max() < 0.02 * bias  # int8 rounding of the projection only, the bias exact
        assert torch.equal(ours.argmax(-1), full.argmax(-1))
    hidden = torch.randn(3, phi.config.d_model, generator=torch.Generator().manual_seed(1))
    plain = Int8RowBlocks(phi.network.lm_head.weight, rows=100)(hidden)
    blocks = Int8RowBlocks(phi.network.lm_head.weight, rows=100, bias=phi.network.lm_head.bias)(hidden)
    torch.testing.assert_close(blocks - plain, phi.network.lm_head.bias.expand_as(plain), rtol=0, atol=1e-4)


def test_a_drafted_greedy_continuation_is_the_plain_one(phi):
    for prompt in PROMPTS:
        phi.draft = "int8"
        try:
            drafted = phi.complete(prompt, max_new_tokens=8)
        finally:
            phi.draft = "off"
        try:
            plain = phi.complete(prompt, max_new_tokens=8)
        finally:
            phi.draft = "auto"
        assert drafted == plain
