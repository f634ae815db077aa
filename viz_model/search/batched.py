"""Translate many sentences efficiently: tokenize, batch by length, decode, detokenize, restore order."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..data import shard
from ..data.batching import pad
from ..nn.model import Transformer
from ..nn.quantize import rows_interact
from ..tokenization.tokenizer import Tokenizer
from .decoding import Hypothesis, beam_search
from .settings import HFGeneration


def source_end(tokenizer: Tokenizer) -> list[int]:
    """What ends every source: ``</s>`` and what the tokenizer puts after it (the original mBART's language code)."""
    return [tokenizer.eos_id, *tokenizer.after_eos]


def encode_source(tokenizer: Tokenizer, text: str) -> list[int]:
    """Source ids as the encoder sees them: the pieces, then `source_end`."""
    return tokenizer.encode(text) + source_end(tokenizer)


def translate_ids(model: Transformer, sources: list[list[int]], beam: int = 4, alpha: float = 0.6,
                  batch_tokens: int = 6000, device: torch.device | None = None,
                  progress: Callable[[int], None] | None = None, hf: HFGeneration | None = None,
                  draft: Transformer | None = None) -> list[Hypothesis]:
    """Decode every source (ids ending in ``</s>``); batches group similar lengths; order is preserved.

    An int8 search network decodes one sentence at a time (see `viz_model.nn.quantize.rows_interact`). `hf`: search
    by transformers' rule with these settings; `draft`: an int8 draft for a batch of one sentence (see
    `viz_model.search.decoding.beam_search`)."""
    device = device or next(model.parameters()).device
    if rows_interact(model):
        batch_tokens = 0
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    chunks, start = [], 0
    while start < len(order):
        end = start + 1
        while end < len(order) and len(sources[order[end]]) * (end - start + 1) * beam <= batch_tokens:
            end += 1
        chunks.append(order[start:end])
        start = end
    done = {}  # under torchrun each process searches its share of the batches (viz_model.data.shard)
    for number, chunk in shard.share(chunks):
        src = pad([sources[i] for i in chunk], model.config.pad_id).to(device)
        done[number] = beam_search(model, src, beam=beam, alpha=alpha, hf=hf, draft=draft)
        if progress is not None:
            progress(len(chunk))
    results: list[Hypothesis | None] = [None] * len(sources)
    for chunk, hyps in zip(chunks, shard.gather(done, len(chunks))):
        for i, hyp in zip(chunk, hyps):
            results[i] = hyp
    return results  # type: ignore[return-value]


def translate_texts(model: Transformer, tokenizer: Tokenizer, texts: list[str], beam: int = 4, alpha: float = 0.6,
                    device: torch.device | None = None, progress: Callable[[int], None] | None = None) -> list[str]:
    """Translations of `texts` (detokenized strings)."""
    hyps = translate_ids(model, [encode_source(tokenizer, t) for t in texts], beam, alpha, device=device,
                         progress=progress)
    return [tokenizer.decode(h.tokens) for h in hyps]
