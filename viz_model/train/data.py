"""Evaluation sets, tokenization, weighted epochs of several corpora and length-grouped batches.

Reading the text files: `viz_model.data.textfiles`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data.batching import pad
from ..tokenization.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer


@dataclass
class EvalSet:
    """Source sentences, each with one or more reference translations; `name` labels its results."""

    name: str
    src: list[str]
    refs: list[list[str]]
    corpus: str = ""

    @classmethod
    def single(cls, name: str, src: list[str], tgt: list[str], corpus: str = "") -> EvalSet:
        """A set with one reference per sentence (aligned files)."""
        return cls(name, src, [[t] for t in tgt], corpus)

    def head(self, n: int) -> EvalSet:
        """The first `n` sentences (e.g. for a quick BLEU during training)."""
        return EvalSet(self.name, self.src[:n], self.refs[:n], self.corpus)

    def pairs(self) -> tuple[list[str], list[str]]:
        """One (source, reference) pair per reference, e.g. for a validation loss."""
        return [s for s, refs in zip(self.src, self.refs) for _ in refs], [r for refs in self.refs for r in refs]

    @property
    def references(self) -> int:
        return sum(len(r) for r in self.refs)


@dataclass
class EncodedPairs:
    """Token ids of aligned sentences: source ``x </s>``, target ``y`` (``<s>``/``</s>`` added per batch); a
    language model's lines are targets with empty sources (`encode_texts`)."""

    src: list[list[int]]
    tgt: list[list[int]]

    def __len__(self) -> int:
        return len(self.src)


def concat_pairs(parts: list[EncodedPairs]) -> EncodedPairs:
    """One dataset from several (corpus i's pairs follow corpus i-1's: see `sample_epoch`)."""
    return EncodedPairs([s for p in parts for s in p.src], [t for p in parts for t in p.tgt])


def encode_pairs(tokenizer: Tokenizer, src: list[str], tgt: list[str], max_len: int) -> EncodedPairs:
    """Tokenize and drop empty pairs and pairs longer than `max_len` pieces on either side."""
    src_ids, tgt_ids = tokenizer.encode_batch(src), tokenizer.encode_batch(tgt)
    keep_src, keep_tgt = [], []
    for s, t in zip(src_ids, tgt_ids):
        if s and t and len(s) + 1 <= max_len and len(t) + 1 <= max_len:
            keep_src.append(s + [EOS_ID])
            keep_tgt.append(t)
    return EncodedPairs(keep_src, keep_tgt)


def encode_texts(tokenizer: Tokenizer, lines: list[str], max_len: int) -> EncodedPairs:
    """A decoder-only run's lines as pairs with no source: the model reads ``<s> y`` and predicts ``y </s>``; empty
    lines and lines longer than `max_len` - 1 pieces are dropped."""
    kept = [ids for ids in tokenizer.encode_batch(lines) if ids and len(ids) + 1 <= max_len]
    return EncodedPairs([[] for _ in kept], kept)


def encode_lines(tokenizer: Any, lines: list[str], max_len: int) -> EncodedPairs:
    """An encoder-only run's lines as pairs with no source: each line's ids with its special tokens (``[CLS] y
    [SEP]``, `tokenizer.encode_batch`); empty lines and lines of more than `max_len` ids are dropped."""
    kept = [ids for ids in tokenizer.encode_batch([line for line in lines if line.strip()]) if len(ids) <= max_len]
    return EncodedPairs([[] for _ in kept], kept)


@dataclass
class Batch:
    src: torch.Tensor | None  # (batch, src_len) ids ending in </s>, padded; None: a language model's text
    tgt_in: torch.Tensor  # (batch, tgt_len) <s> y
    tgt_out: torch.Tensor  # (batch, tgt_len) y </s>
    target_tokens: int  # non-padding target tokens

    def to(self, device: torch.device) -> Batch:
        src = None if self.src is None else self.src.to(device, non_blocking=True)
        return Batch(src, self.tgt_in.to(device, non_blocking=True),
                     self.tgt_out.to(device, non_blocking=True), self.target_tokens)


def collate(data: EncodedPairs, indices: list[int]) -> Batch:
    """The padded batch of `indices`; pairs without a source (a language model's lines) give ``src`` None."""
    src = pad([data.src[i] for i in indices]) if data.src[indices[0]] else None
    tgt_in = pad([[BOS_ID] + data.tgt[i] for i in indices])
    tgt_out = pad([data.tgt[i] + [EOS_ID] for i in indices])
    return Batch(src, tgt_in, tgt_out, int((tgt_out != PAD_ID).sum()))


def sample_epoch(sizes: list[int], weights: list[float], seed: int, epoch: int) -> np.ndarray:
    """Indices of one epoch's pairs in the concatenated corpora (sizes in order): corpus i contributes
    ``int(weights[i])`` copies of all its pairs plus ``round(frac(weights[i]) * sizes[i])`` of its pairs drawn
    without replacement. The draw depends only on (seed, epoch), so a resumed run sees the same epoch; all
    weights 1 give every pair once (``arange``), the single-corpus behaviour."""
    rng = np.random.default_rng([seed, epoch, len(sizes)])  # not make_batches' generator: its draws stay the same
    parts, offset = [], 0
    for size, weight in zip(sizes, weights):
        whole, fraction = divmod(float(weight), 1.0)
        parts += [np.arange(offset, offset + size)] * int(whole)
        if extra := round(fraction * size):
            parts.append(offset + np.sort(rng.choice(size, extra, replace=False)))
        offset += size
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def make_batches(data: EncodedPairs, batch_tokens: int, seed: int, epoch: int,
                 pool: np.ndarray | None = None) -> list[list[int]]:
    """Group sentences of similar length into batches of about `batch_tokens` padded tokens (per side).

    `pool` (default: every pair once) lists the pairs of the epoch, repeats allowed (`sample_epoch`).
    The order depends only on (seed, epoch), so a resumed run sees exactly the same batches.
    """
    rng = np.random.default_rng([seed, epoch])
    pool = np.arange(len(data)) if pool is None else np.asarray(pool)
    lengths = np.array([max(len(s), len(t) + 1) for s, t in zip(data.src, data.tgt)], dtype=np.int64)[pool]
    order = np.lexsort((rng.random(len(lengths)), lengths))  # by length, random among equal lengths
    batches, current, longest = [], [], 0
    for i in order.tolist():
        longest_if_added = max(longest, int(lengths[i]))
        if current and longest_if_added * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest_if_added = [], int(lengths[i])
        current.append(int(pool[i]))
        longest = longest_if_added
    if current:
        batches.append(current)
    perm = rng.permutation(len(batches))
    return [batches[j] for j in perm]
