"""Greedy and beam search on the fast path (no attention weights kept), batched, with a key/value cache.

Each step feeds only the newest token; the decoder's past keys/values and the projected encoder memory
come from the cache, so a step costs O(length), not a recomputation of the whole prefix.
Length penalty (Wu et al., 2016, as in the paper's setup): ``lp(Y) = ((5 + |Y|) / 6) ** alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .model import EncoderOutput, Transformer
from .tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Hypothesis:
    """One finished output: generated ids (ending in ``</s>`` unless cut at the length limit)."""

    tokens: list[int]
    log_prob: float  # sum of log-probabilities of `tokens`
    score: float  # log_prob / length penalty: what beam search ranks by


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


def max_output_lengths(src: Tensor, model: Transformer, extra: int = 50) -> list[int]:
    """Per sentence: source length + `extra` tokens, capped so ``<s>`` + output fit in max_positions."""
    lengths = (src != model.config.pad_id).sum(dim=1).tolist()
    cap = model.config.max_positions - 1
    return [max(1, min(n + extra, cap)) for n in lengths]


def _expand(encoded: EncoderOutput, times: int) -> EncoderOutput:
    index = torch.arange(encoded.hidden.shape[0], device=encoded.hidden.device).repeat_interleave(times)
    return EncoderOutput(encoded.hidden.index_select(0, index), encoded.mask.index_select(0, index),
                         has_padding=encoded.has_padding)


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, max_lens: list[int] | None = None) -> list[Hypothesis]:
    """Pick the most probable token at each step, for a batch of sources ``(batch, src_len)``."""
    return beam_search(model, src, beam=1, alpha=0.0, max_lens=max_lens)


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, beam: int = 4, alpha: float = 0.6,
                max_lens: list[int] | None = None) -> list[Hypothesis]:
    """Beam search for a batch of sources; returns the best hypothesis of each sentence.

    A hypothesis ends at ``</s>`` or at its sentence's length limit. A sentence stops early (as OpenNMT does)
    as soon as the best candidate of a step ends in ``</s>``, or it holds `beam` finished hypotheses; the
    result is the finished hypothesis with the best length-penalised score. Beam 1 is exactly greedy search.
    """
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    batch, device = src.shape[0], src.device
    max_lens = max_lens or max_output_lengths(src, model)
    if len(max_lens) != batch:
        raise ValueError(f"max_lens has {len(max_lens)} entries for a batch of {batch}")
    encoded = _expand(model.encode(src), beam)
    tokens = torch.full((batch * beam, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    done = [False] * batch
    cache = None
    for step in range(max(max_lens)):
        out = model.decode(tokens[:, -1:], encoded, cache=cache, offset=step)
        log_probs = torch.log_softmax(model.logits(out.hidden[:, -1]).float(), dim=-1)
        vocab = log_probs.shape[-1]
        width = min(2 * beam, vocab)
        # the best `width` of each row first, then the best `width` of the sentence among those (cheaper than
        # one top-k over beam * vocab scores, and the same candidates)
        row_scores, row_tokens = (scores.view(-1, 1) + log_probs).topk(width, dim=-1)
        top_scores, top_pos = row_scores.view(batch, beam * width).topk(width, dim=1)
        top_index = (top_pos // width) * vocab + row_tokens.view(batch, beam * width).gather(1, top_pos)
        top_scores_l, top_index_l = top_scores.tolist(), top_index.tolist()
        rows = torch.arange(batch * beam, device=device).view(batch, beam).clone()
        next_tokens = torch.full((batch, beam), PAD_ID, dtype=torch.long, device=device)
        next_scores = torch.full((batch, beam), float("-inf"), device=device)
        prefixes = tokens[:, 1:].tolist()
        for b in range(batch):
            if done[b]:
                continue
            last_step = step + 1 >= max_lens[b]
            kept = 0
            best_ends = top_index_l[b][0] % vocab == EOS_ID
            for s, index in zip(top_scores_l[b], top_index_l[b]):
                if s == float("-inf"):
                    break
                source_row, token = b * beam + index // vocab, index % vocab
                if token == EOS_ID or last_step:
                    seq = prefixes[source_row] + [token]
                    finished[b].append(Hypothesis(seq, s, s / length_penalty(len(seq), alpha)))
                else:
                    rows[b, kept], next_tokens[b, kept], next_scores[b, kept] = source_row, token, s
                    kept += 1
                if kept == beam:
                    break
            if best_ends or len(finished[b]) >= beam or last_step:
                done[b] = True
                next_scores[b] = float("-inf")
        if all(done):
            break
        flat_rows = rows.view(-1)
        tokens = torch.cat([tokens.index_select(0, flat_rows), next_tokens.view(-1, 1)], dim=1)
        cache = [layer.reorder(flat_rows, same_source=True) for layer in out.cache]
        scores = next_scores
    return [max(hyps, key=lambda h: h.score) for hyps in finished]
