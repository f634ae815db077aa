"""Imported decoder-only models on a CUDA GPU in bf16 (issue 51): a small random Llama (grouped-query, llama3 RoPE),
GPT-2 and gpt-oss (learned sinks, a sliding layer, YaRN, a mixture of experts; issue 60), both sides cast to bfloat16
on the same GPU, transformers with eager attention. Every attention map and the logits agree within a bf16 tolerance
(the two compute the same formulas in another order of roundings); a folder saved in bf16 keeps bf16 on the GPU
without a cast. Device: CUDA (skipped without one); precision: bf16.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from support.hf_lm import CONFIGS, build_lm_folder  # noqa: E402

import viz_model  # noqa: E402
from viz_model.hf.importer import import_model  # noqa: E402

pytestmark = pytest.mark.gpu
MAP_TOLERANCE = 2e-2  # bf16 keeps 8 bits of mantissa: weights near 1 are off by up to ~4e-3 per rounding
LOGIT_TOLERANCE = 0.1  # relative to the largest logit of the row
PROMPT = "The red dog reads a book in the park, and the old man runs in the snow."


@pytest.mark.parametrize("family", ["llama", "gpt2", "gpt_oss"])
def test_bf16_maps_and_logits_agree_with_transformers_on_the_gpu(family, tmp_path):
    folder = build_lm_folder(tmp_path, family)
    ours = viz_model.load(import_model(str(folder), tmp_path / "ours"), device="cuda")
    ours.network.to(torch.bfloat16)
    theirs = getattr(transformers, CONFIGS[family][1]).from_pretrained(folder, attn_implementation="eager",
                                                                       dtype=torch.bfloat16).to("cuda").eval()
    ids = torch.tensor([ours.tokenizer.encode(PROMPT)], device="cuda")
    with torch.no_grad():
        expected = theirs(ids, output_attentions=True)
        got = ours.network(ids, need_weights=True)
    assert got.logits.dtype == expected.logits.dtype == torch.bfloat16
    for a, b in zip(got.attentions, expected.attentions, strict=True):
        assert (a.float() - b.float()).abs().max().item() <= MAP_TOLERANCE
    scale = expected.logits.float().abs().amax(-1, keepdim=True)
    assert ((got.logits.float() - expected.logits.float()).abs() / scale).max().item() <= LOGIT_TOLERANCE


def test_a_bf16_folder_stays_bf16_on_the_gpu_read_where_it_is(tmp_path):
    """A folder saved in bf16 is read where it is: on the GPU its weights keep their dtype (no cast asked for) and
    agree with transformers' bf16 model as above."""
    folder = build_lm_folder(tmp_path, "llama")
    theirs = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.bfloat16)
    theirs.save_pretrained(folder)
    ours = viz_model.load(import_model(str(folder), tmp_path / "ours"), device="cuda")
    assert not (ours.directory / "model.safetensors").exists()
    assert {(p.dtype, p.device.type) for p in ours.network.parameters()} == {(torch.bfloat16, "cuda")}
    theirs = theirs.to("cuda").eval()
    ids = torch.tensor([ours.tokenizer.encode(PROMPT)], device="cuda")
    with torch.no_grad():
        expected = theirs(ids, output_attentions=True)
        got = ours.network(ids, need_weights=True)
    for a, b in zip(got.attentions, expected.attentions, strict=True):
        assert (a.float() - b.float()).abs().max().item() <= MAP_TOLERANCE
    scale = expected.logits.float().abs().amax(-1, keepdim=True)
    assert ((got.logits.float() - expected.logits.float()).abs() / scale).max().item() <= LOGIT_TOLERANCE
