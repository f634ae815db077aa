"""Imported T5 v1.1, BART, mBART-50 and original mBART models on a CUDA GPU (issue 45): a trace forced on the CPU's
output records the CPU's maps and probabilities, the logits and maps equal transformers' on the same GPU, and greedy
search gives ``generate``'s output there. Device: CUDA (skipped without one); searches: the folder's own rule (beam)
on the CPU, greedy on the GPU against ``generate``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")  # the test folders' tokenizers are trained here
from support.hf import WORDS_EN, sentences  # noqa: E402
from support.hf_families import (  # noqa: E402
    T5_PREFIX,
    build_bart_folder,
    build_mbart50_folder,
    build_original_mbart_folder,
    build_t5_folder,
)

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402

pytestmark = pytest.mark.gpu
MAP_TOLERANCE = 1e-5
FAMILIES = {"t5-v1.1": (lambda root: build_t5_folder(root, "1.1"), "T5ForConditionalGeneration", T5_PREFIX),
            "bart": (build_bart_folder, "BartForConditionalGeneration", ""),
            "mbart50": (build_mbart50_folder, "MBartForConditionalGeneration", ""),
            "mbart": (build_original_mbart_folder, "MBartForConditionalGeneration", "")}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    """(the imported model on the CPU, on the GPU, transformers' model on the GPU, its tokenizer, the source prefix,
    generate's extra settings)."""
    build, name, prefix = FAMILIES[request.param]
    folder = build(tmp_path_factory.mktemp("hf"))
    out = tmp_path_factory.mktemp("assets") / folder.name
    assert main(["import", str(folder), "--out", str(out)]) == 0
    theirs = getattr(transformers, name).from_pretrained(folder, attn_implementation="eager").to("cuda").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    extra = {"forced_bos_token_id": tokenizer.convert_tokens_to_ids("de_DE")} if request.param == "mbart50" else {}
    return (viz_model.load(out, device="cpu", precision="fp32"), viz_model.load(out, device="cuda", precision="fp32"),
            theirs, tokenizer, prefix, extra)


def test_a_forced_trace_on_the_gpu_records_the_cpus_maps(family):
    cpu, gpu, *_ = family
    assert gpu.device.type == "cuda" and gpu.search_network is gpu.network  # no packed copy off the CPU
    for text in sentences(WORDS_EN, 5, 3):
        found = cpu.trace(text).output_ids  # the folder's own search on the CPU (random weights: to the limit)
        a, b = cpu.trace(text, forced_ids=found), gpu.trace(text, forced_ids=found)
        assert b.output_ids == a.output_ids and b.source_ids == a.source_ids
        for kind in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
            for layer, (x, y) in enumerate(zip(getattr(a, kind), getattr(b, kind), strict=True)):
                gap = float(np.abs(x - y).max())
                assert gap <= MAP_TOLERANCE, f"{text!r}: {kind}[{layer}] differs by {gap:.2e}"
        assert b.log_probability == pytest.approx(a.log_probability, abs=1e-4)


def test_logits_and_maps_equal_transformers_on_the_same_gpu(family):
    _, gpu, theirs, tokenizer, prefix, _ = family
    for text in sentences(WORDS_EN, 5, 4):
        src = tokenizer(prefix + text, return_tensors="pt").input_ids.to("cuda")
        assert src[0].tolist() == gpu.encode(text)
        trace = gpu.trace(text, beam=1)
        tgt = torch.tensor([trace.target_ids], device="cuda")
        with torch.no_grad():
            out = theirs(input_ids=src, decoder_input_ids=tgt, output_attentions=True)
            ours = gpu.network(src, tgt, need_weights=True)
        torch.testing.assert_close(ours.logits, out.logits, rtol=1e-4, atol=1e-4)
        for mine, other in ((ours.encoder_attentions, out.encoder_attentions),
                            (ours.decoder_attentions, out.decoder_attentions),
                            (ours.cross_attentions, out.cross_attentions)):
            for x, y in zip(mine, other, strict=True):
                torch.testing.assert_close(x, y, rtol=0, atol=MAP_TOLERANCE)


def test_greedy_search_on_the_gpu_gives_generates_output(family):
    _, gpu, theirs, tokenizer, prefix, extra = family
    for text in sentences(WORDS_EN, 10, 5):
        ours = gpu.trace(text, beam=1)
        src = tokenizer(prefix + text, return_tensors="pt").input_ids.to("cuda")
        with torch.no_grad():
            out = theirs.generate(src, num_beams=1, do_sample=False, max_new_tokens=len(ours.output_ids), **extra)
        assert ours.output_ids == out[0, 1:].tolist()[:len(ours.output_ids)], text
