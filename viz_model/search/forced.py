"""Teacher-forced passes over many sentences: length-grouped padded batches with the network's output, and each
sentence's log-probability.

What `TranslationModel.forced_passes` and `TranslationModel.sequence_log_probs` run for the corpus statistics and
head ablation, so both batch, pad and strip padding the same way (`viz_model.data.batching.forced_batches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..data import shard
from ..data.batching import DEFAULT_BATCH_TOKENS, ForcedBatch, forced_batches
from ..nn.model import HeadMask, Seq2SeqOutput, Transformer


def network_device(network: Transformer) -> torch.device:
    return next(network.parameters()).device


@torch.inference_mode()
def forced_passes(network: Transformer, sources: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                  batch_tokens: int = DEFAULT_BATCH_TOKENS, head_mask: HeadMask | None = None,
                  need_weights: bool = False) -> Iterator[tuple[ForcedBatch, Seq2SeqOutput]]:
    """Each length-grouped batch of (source ids, output ids) pairs with the network's teacher-forced output (its
    attention records with `need_weights`), shortest first; under torchrun only this process's share."""
    cfg = network.config
    for batch in forced_batches(sources, outputs, batch_tokens, network_device(network), cfg.bos_id, cfg.pad_id,
                                shared=True):
        yield batch, network(batch.src, batch.tgt_in, need_weights=need_weights, head_mask=head_mask)


@torch.inference_mode()
def sequence_log_probs(network: Transformer, sources: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]],
                       head_mask: HeadMask | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> np.ndarray:
    """``log P(output | source)`` of each pair (sum over its output tokens), teacher-forced, in input order."""
    result = np.zeros(len(sources), dtype=np.float64)
    pad_id = network.config.pad_id
    done = []  # under torchrun each process scores its share of the batches (viz_model.data.shard)
    for batch, out in forced_passes(network, sources, outputs, batch_tokens, head_mask):
        logits = out.logits.float()
        nll = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=pad_id, reduction="none")
        done.append((batch.indices, -nll.sum(dim=1).double().cpu().numpy()))
    for indices, values in shard.gather_list(done):
        result[indices] = values
    return result
