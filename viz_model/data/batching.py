"""Batches of token ids: rows of different lengths as one right-padded tensor."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..tokenization.tokenizer import PAD_ID


def pad(rows: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Rows of ids as one ``(rows, longest)`` int64 tensor, filled up with `pad_id`; every row needs a token."""
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("padding needs at least one row, and no row may be empty")
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(list(r), dtype=torch.long)
    return out
