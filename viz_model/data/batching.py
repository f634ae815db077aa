"""Batches of token ids: rows of different lengths as one right-padded tensor, and the length-grouped batches of
(source ids, output ids) pairs that teacher-forced passes over a corpus read (`viz_model.search.forced`).

An output is a list of ids ending in ``</s>`` (unless a search was cut at its length limit); the decoder reads
``<s> y1 .. y_{n-1}``, exactly as `TranslationModel.trace` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from ..config.checks import check_int
from ..tokenization.tokenizer import PAD_ID
from . import shard

DEFAULT_BATCH_TOKENS = 3000
"""Padded tokens per teacher-forced batch (`forced_batches`) unless told."""


def pad(rows: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Rows of ids as one ``(rows, longest)`` int64 tensor, filled up with `pad_id`; every row needs a token."""
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("padding needs at least one row, and no row may be empty")
    longest = max(len(r) for r in rows)
    return torch.tensor([[*r, *[pad_id] * (longest - len(r))] for r in rows], dtype=torch.long)  # one tensor made


def decoder_input(output_ids: Sequence[int], bos_id: int) -> list[int]:
    """What the decoder reads to predict `output_ids`: the start id (``<s>``) then all of them but the last."""
    return [bos_id, *output_ids[:-1]]


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices sorted by length (stable), cut into batches whose padded size (longest x count) fits `batch_tokens`;
    a sentence longer than `batch_tokens` gets a batch of its own."""
    check_int("batch_tokens", batch_tokens, 1, error=ValueError,
              message=f"batch_tokens must be an integer >= 1, got {batch_tokens!r}")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and lengths[i] * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


@dataclass
class ForcedBatch:
    """Sentences `indices` padded: ``src`` ``(batch, src_len)``, ``tgt_in`` / ``tgt_out`` ``(batch, tgt_len)``."""

    indices: list[int]
    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def forced_batches(sources: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]], batch_tokens: int,
                   device: torch.device | str = "cpu", bos_id: int = 2, pad_id: int = 0, shared: bool = False
                   ) -> Iterator[ForcedBatch]:
    """Length-grouped teacher-forcing batches of (source ids, output ids) pairs, shortest first; `shared`: only
    this process's share of them under torchrun (`viz_model.data.shard`)."""
    if len(sources) != len(outputs):
        raise ValueError(f"{len(sources)} sources but {len(outputs)} outputs")
    if any(not s for s in sources) or any(not o for o in outputs):
        raise ValueError("every source and every output needs at least one token")
    lengths = [max(len(s), len(o)) for s, o in zip(sources, outputs)]
    batches = length_batches(lengths, batch_tokens)
    for _, chunk in shard.share(batches) if shared else enumerate(batches):
        yield ForcedBatch(chunk, pad([list(sources[i]) for i in chunk], pad_id).to(device),
                          pad([decoder_input(outputs[i], bos_id) for i in chunk], pad_id).to(device),
                          pad([list(outputs[i]) for i in chunk], pad_id).to(device))
