"""Packing a decoder-only run's lines into long sequences: several captions one after another (each ended by
``</s>``), some of them repeated inside their sequence, so that the context is long and holds repeated phrases."""

from __future__ import annotations

import numpy as np

from ..tokenization.tokenizer import EOS_ID
from .data import EncodedPairs


def pack_texts(data: EncodedPairs, pack_len: int, repeat: float = 0.0, seed: int = 0) -> EncodedPairs:
    """`data`'s lines (``y``, no source) in an order drawn from `seed`, packed greedily into sequences ``y1 </s> y2
    </s> ... yk`` that fit `pack_len` positions once `collate` adds ``<s>`` and the last ``</s>``. Before each line
    after a sequence's first, with chance `repeat`, a copy of one of that sequence's earlier lines (drawn at random)
    goes in instead, and the line waits for the next place; every line is packed once (a line longer than
    ``pack_len - 1`` is dropped)."""
    if pack_len < 2:
        raise ValueError(f"pack_len must be at least 2, got {pack_len}")
    if not 0.0 <= repeat < 1.0:
        raise ValueError(f"repeat must be a chance in [0, 1), got {repeat}")
    rng = np.random.default_rng([seed, pack_len])
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
        if current and rng.random() < repeat:
            line, fresh = current[int(rng.integers(len(current)))], False
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
