"""Each position's loss: -log p(target) of a row of logits, read in float64 (what perplexities and the loss on
repeated tokens average)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def token_losses(logits: torch.Tensor, targets: Sequence[int]) -> np.ndarray:
    """``(len(targets),)`` -log p(target) of each row of `logits` ``(rows, vocab)``, in float64."""
    log_probs = torch.log_softmax(logits.double(), -1)
    rows = torch.arange(len(targets), device=logits.device)
    return -log_probs[rows, torch.tensor(list(targets), device=logits.device)].cpu().numpy()
