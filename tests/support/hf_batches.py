"""transformers' ``generate`` over many inputs, a beam search's inputs of one length in one batch with no padding:
each row is what ``generate`` gives that input alone, bit for bit (tests/library/test_hf_batches.py), for the
references of the fitted exactness tests in a fraction of the time. A greedy search runs one input at a time: a batch
of one row runs through other kernels than a batch of several, and its scores can differ in the last bit."""

from __future__ import annotations


def by_length(inputs: list[list[int]]) -> dict[int, list[int]]:
    """The positions of `inputs` grouped by their length, in the order of first appearance."""
    groups: dict[int, list[int]] = {}
    for i, ids in enumerate(inputs):
        groups.setdefault(len(ids), []).append(i)
    return groups


def generate_rows(model, inputs: list[list[int]], mask: bool = False, **settings) -> list[list[int]]:
    """``generate``'s output row (with `settings`; `mask`: an attention mask of ones given, as a decoder-only model's
    callers give it) for each of `inputs` (token ids); a beam search runs the inputs of one length together, a row
    that ends before the others of its batch going on with padding."""
    import torch

    beams = settings.get("num_beams") or model.generation_config.num_beams or 1
    batches = by_length(inputs).values() if beams > 1 else [[i] for i in range(len(inputs))]
    rows: list[list[int]] = [[] for _ in inputs]
    for positions in batches:
        batch = torch.tensor([inputs[i] for i in positions])
        masked = {"attention_mask": torch.ones_like(batch)} if mask else {}
        with torch.no_grad():
            out = model.generate(batch, **masked, **settings)
        for i, row in zip(positions, out.tolist()):
            rows[i] = row
    return rows


def up_to(ids: list[int], ends) -> list[int]:
    """`ids` up to and with the first of `ends` (all of them where none is there)."""
    first = next((i for i, token in enumerate(ids) if token in ends), None)
    return ids if first is None else ids[:first + 1]


def translations(model, tokenizer, texts: list[str], eos: int, prefix: str = "", **settings) -> list[list[int]]:
    """What an encoder-decoder's ``generate`` outputs for each text (after `prefix`, such as T5's task prefix) as for
    the text alone: the ids after the start token, up to `eos`."""
    inputs = [tokenizer(prefix + text).input_ids for text in texts]
    return [up_to(row[1:], (eos,)) for row in generate_rows(model, inputs, **settings)]
