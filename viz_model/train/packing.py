"""Packing a decoder-only run's lines into long sequences: several captions one after another (each ended by
``</s>``), some of them repeated inside their sequence, so that the context is long and holds repeated phrases; and,
as a disclosed copying curriculum, spans of random pieces followed by their copy."""

from __future__ import annotations

import numpy as np

from ..tokenization.tokenizer import EOS_ID, SPECIAL_IDS
from .data import EncodedPairs

SPAN_LENGTHS = (8, 32)  # a random span's length is drawn from this range (both ends included)


def span_ids(vocab_size: int) -> np.ndarray:
    """The ids a random span draws from: every id below `vocab_size` but the special ones."""
    return np.setdiff1d(np.arange(vocab_size), np.asarray(SPECIAL_IDS))


def random_span(rng: np.random.Generator, allowed: np.ndarray) -> list[int]:
    """Distinct random ids of `allowed` (`span_ids`), 8 to 32 of them, followed by the same ids again."""
    span = rng.choice(allowed, size=int(rng.integers(SPAN_LENGTHS[0], SPAN_LENGTHS[1] + 1)), replace=False)
    return [int(t) for t in np.tile(span, 2)]


def pack_texts(data: EncodedPairs, pack_len: int, repeat: float = 0.0, seed: int = 0, spans: float = 0.0,
               vocab_size: int = 0) -> EncodedPairs:
    """`data`'s lines (``y``, no source) in an order drawn from `seed`, packed greedily into sequences ``y1 </s> y2
    </s> ... yk`` that fit `pack_len` positions once `collate` adds ``<s>`` and the last ``</s>``. Before each line
    after a sequence's first, with chance `repeat`, a copy of one of that sequence's earlier lines (drawn at random)
    goes in instead, and the line waits for the next place; every line is packed once (a line longer than
    ``pack_len - 1`` is dropped). With chance `spans`, a `random_span` of ids below `vocab_size` goes in instead."""
    if pack_len < 2:
        raise ValueError(f"pack_len must be at least 2, got {pack_len}")
    if not 0.0 <= repeat < 1.0:
        raise ValueError(f"repeat must be a chance in [0, 1), got {repeat}")
    if not 0.0 <= spans < 1.0 - repeat:
        raise ValueError(f"spans must be a chance in [0, 1 - repeat), got {spans}")
    if spans and vocab_size < len(SPECIAL_IDS) + SPAN_LENGTHS[1]:
        raise ValueError(f"random spans need a vocabulary of at least {len(SPECIAL_IDS) + SPAN_LENGTHS[1]} ids, "
                         f"got {vocab_size}")
    rng = np.random.default_rng([seed, pack_len])
    allowed = span_ids(vocab_size) if spans else None  # drawn from by every span: made once
    lines = [data.tgt[i] for i in rng.permutation(len(data)).tolist() if len(data.tgt[i]) + 1 <= pack_len]
    sequences: list[list[int]] = []
    current: list[list[int]] = []
    length, index = 0, 0

    def close() -> None:
        nonlocal current, length
        sequences.append([t for k, line in enumerate(current) for t in ([EOS_ID] if k else []) + line])
        current, length = [], 0

    while index < len(lines):
        line = lines[index]
        draw = rng.random() if current else 1.0
        if draw < repeat:
            line, fresh = current[int(rng.integers(len(current)))], False
        elif draw < repeat + spans:
            line, fresh = random_span(rng, allowed), False
        else:
            fresh = True
        if current and length + 1 + len(line) + 1 > pack_len:  # ``</s> line`` would not fit with the final </s>
            close()
            continue
        current.append(line)
        length += len(line) + (1 if len(current) > 1 else 0)
        index += fresh
    if current:
        close()
    return EncodedPairs([[] for _ in sequences], sequences)
