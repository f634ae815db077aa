"""Head patching checked against transformers: forward pre-hooks on each layer's output projection swap the patched
heads' slices of its input for the source run's (used on random weights by test_hf_import_lm and on fitted ones by
test_hf_generate_lm)."""

from __future__ import annotations

import torch

from support.hf import WORDS_EN, sentences
from viz_model.kinds.language_model import shared_prefix

LOGIT_TOLERANCE = 1e-4
OUTPUT_PROJECTIONS = ("attn.c_proj", "attention.dense", "attention.out_proj", "self_attn.out_proj", "self_attn.dense",
                      "self_attn.o_proj")  # GPT-2; BLOOM, GPT-NeoX; GPT-Neo; OPT; Phi; the Llama kind


def equal_length_prompts(imported, count: int = 2) -> list[str]:
    """`count` different test sentences of one token count under `imported`'s tokenizer."""
    by_length: dict[int, list[str]] = {}
    for text in sentences(WORDS_EN, 60, 11):
        length = len(imported.tokenizer.encode(text))
        if length <= min(24, imported.config.max_positions):
            by_length.setdefault(length, []).append(text)
    return max(by_length.values(), key=len)[:count]


def transformers_patched(model, ids, source_ids, heads, d_head: int) -> torch.Tensor:
    """transformers' next-token logits at the last position of `ids` with each (layer, head) of `heads` taking its
    slice of the output projection's input from the run of `source_ids`: forward pre-hooks."""
    projections = [m for name, m in model.named_modules() if name.endswith(OUTPUT_PROJECTIONS)]
    assert len(projections) == model.config.num_hidden_layers
    source: dict[int, torch.Tensor] = {}

    def keep(layer):
        return lambda module, args: source.__setitem__(layer, args[0].clone())

    def swap(layer):
        def hook(module, args):
            x = args[0].clone()
            for at, head in heads:
                if at == layer:
                    x[..., head * d_head:(head + 1) * d_head] = source[layer][..., head * d_head:(head + 1) * d_head]
            return (x, *args[1:])
        return hook

    for hooked in (keep, swap):
        handles = [p.register_forward_pre_hook(hooked(layer)) for layer, p in enumerate(projections)]
        with torch.no_grad():
            logits = model(torch.tensor([source_ids if hooked is keep else ids])).logits[0, -1]
        for handle in handles:
            handle.remove()
    return logits


def assert_patching_equals_pre_hooks(model, imported) -> None:
    """`patched_logits` of several head sets, and `patched_runs` of them in one call over a prompt sharing all but its
    last three tokens with the source, equal transformers' pre-hooked logits within 1e-4 (and well below the change
    each patch makes, so that the comparison can fail)."""
    prompt, source = equal_length_prompts(imported)
    ids, source_ids = imported.encode(prompt), imported.encode(source)
    layers, heads = imported.config.decoder_layers, imported.num_heads
    d_head = imported.network.layers[0].self_attn.d_head
    chosen = [[(0, 1)], [(layers - 1, heads - 1), (0, 0)], [(layer, 2) for layer in range(layers)],
              [(layers - 1, head) for head in range(heads)], [(layer, head) for layer in range(layers)
                                                              for head in range(heads)]]
    unpatched = transformers_patched(model, ids, source_ids, [], d_head)
    for patched in chosen:
        theirs = transformers_patched(model, ids, source_ids, patched, d_head)
        ours = imported.patched_logits(prompt, source, patched)
        error, change = float((ours - theirs).abs().max()), float((theirs - unpatched).abs().max())
        assert error <= LOGIT_TOLERANCE, patched
        assert error <= 0.02 * change, (patched, error, change)  # the patch moves the logits far more than that
    twin = [*ids[:-3], ids[-1], ids[-3], ids[-2]]  # the last three tokens turned: the first n - 3 positions shared
    assert shared_prefix(ids, twin) == len(ids) - 3
    ours = imported.patched_runs(ids, imported.head_outputs(twin)[1], chosen, shared_prefix(ids, twin))
    for row, patched in zip(ours, chosen):  # every row in one call: the shared positions are the prompt's own run's
        theirs = transformers_patched(model, ids, twin, patched, d_head)
        assert (row - theirs).abs().max() <= LOGIT_TOLERANCE, patched


