"""The masked-language-model objective (BERT, Devlin et al., 2019): 15% of the ordinary tokens chosen by a seeded
draw, 80% of those replaced by ``[MASK]``, 10% by a random token, 10% kept; the loss at the chosen positions only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..config.recipe import label_smoothed_loss
from ..data.batching import pad
from ..nn.encoder_lm import MaskedLM
from ..tokenization.tokenizer import PAD_ID
from ..tokenization.wordpiece import MASK_ID, SPECIALS
from .data import Batch, EncodedPairs

TRAINING, HELD_OUT = 0, 1  # what a draw's seed is for: a training batch's masks, or a held-out set's (fixed)


@dataclass(frozen=True)
class MaskingRule:
    """Which tokens a draw chooses and what each chosen token becomes.

    :ivar rate: the chance that an ordinary token (no special token, no padding) is chosen
    :ivar to_mask: the share of chosen tokens replaced by the mask token
    :ivar to_random: the share replaced by a random ordinary token (the rest stay as they are)
    """

    rate: float = 0.15
    to_mask: float = 0.8
    to_random: float = 0.1


BERT_RULE = MaskingRule()
ALL_MASKED = MaskingRule(to_mask=1.0, to_random=0.0)
"""The held-out scores' rule: every chosen token is replaced by the mask token, as a fill-mask user writes it."""


def draw_seed(seed: int, *key: int) -> int:
    """A generator seed from the run's seed and `key` (purpose, epoch, batch...): the same key, the same masks."""
    return int(np.random.SeedSequence([seed, *key]).generate_state(1)[0])


def mask_tokens(ids: torch.Tensor, generator: torch.Generator, vocab_size: int, rule: MaskingRule = BERT_RULE
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, labels)`` of ``(batch, len)`` `ids`: `rule` applied to the ordinary tokens (ids past the
    `SPECIALS`); labels hold the original id at each chosen position and the pad id everywhere else."""
    ordinary = ids >= len(SPECIALS)
    chosen = (torch.rand(ids.shape, generator=generator) < rule.rate) & ordinary
    action = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=generator)
    inputs = torch.where(chosen & (action < rule.to_mask), MASK_ID, ids)
    inputs = torch.where(chosen & (action >= rule.to_mask) & (action < rule.to_mask + rule.to_random), random_ids,
                         inputs)
    return inputs, torch.where(chosen, ids, PAD_ID)


def masked_batch(data: EncodedPairs, indices: list[int], vocab_size: int, seed: int,
                 rule: MaskingRule = BERT_RULE) -> Batch:
    """The padded lines of `indices` (``[CLS] ... [SEP]``) as a batch to fill in: ``tgt_in`` the masked inputs,
    ``tgt_out`` the labels; `target_tokens` counts the chosen positions (at least 1, so a batch with none adds 0)."""
    inputs, labels = mask_tokens(pad([data.tgt[i] for i in indices]), torch.Generator().manual_seed(seed),
                                 vocab_size, rule)
    return Batch(None, inputs, labels, max(int((labels != PAD_ID).sum()), 1))


class MaskedTokenLoss(nn.Module):
    """An encoder's summed label-smoothed loss and plain NLL at the chosen positions of a `masked_batch` (the
    padding is masked from every query)."""

    def __init__(self, model: MaskedLM, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing

    def forward(self, src: None, inputs: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        chosen = labels != PAD_ID
        logits = self.model(inputs, mask=(inputs != PAD_ID)[:, None, None, :]).logits
        return label_smoothed_loss(logits[chosen], labels[chosen], self.smoothing)
