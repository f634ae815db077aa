"""Teacher-forced passes over many sentences: length-grouped padded batches and per-sentence log-probabilities.

Shared by the corpus statistics (`corpus.py`) and head ablation (`ablation.py`), so both batch, pad and strip
padding the same way. An output is a list of ids ending in ``</s>`` (unless a search was cut at its length limit);
the decoder reads ``<s> y1 .. y_{n-1}``, exactly as `TranslationModel.trace` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..data import shard
from ..data.batching import pad
from ..nn.model import HeadMask, Transformer

DEFAULT_BATCH_TOKENS = 3000


def decoder_input(output_ids: Sequence[int], bos_id: int) -> list[int]:
    """What the decoder reads to predict `output_ids`: the start id (``<s>``) then all of them but the last."""
    return [bos_id, *output_ids[:-1]]


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices sorted by length (stable), cut into batches whose padded size (longest x count) fits `batch_tokens`;
    a sentence longer than `batch_tokens` gets a batch of its own."""
    if isinstance(batch_tokens, bool) or not isinstance(batch_tokens, int) or batch_tokens < 1:
        raise ValueError(f"batch_tokens must be an integer >= 1, got {batch_tokens!r}")
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


def network_device(network: Transformer) -> torch.device:
    return next(network.parameters()).device


@torch.inference_mode()
def sequence_log_probs(network: Transformer, sources: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                       head_mask: HeadMask | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> np.ndarray:
    """``log P(output | source)`` of each pair (sum over its output tokens), teacher-forced, in input order."""
    result = np.zeros(len(sources), dtype=np.float64)
    pad_id = network.config.pad_id
    cfg = network.config
    done = []  # under torchrun each process scores its share of the batches (viz_model.data.shard)
    for batch in forced_batches(sources, outputs, batch_tokens, network_device(network), cfg.bos_id, cfg.pad_id,
                                shared=True):
        logits = network(batch.src, batch.tgt_in, head_mask=head_mask).logits.float()
        nll = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=pad_id, reduction="none")
        done.append((batch.indices, -nll.sum(dim=1).double().cpu().numpy()))
    for indices, values in shard.gather_list(done):
        result[indices] = values
    return result
