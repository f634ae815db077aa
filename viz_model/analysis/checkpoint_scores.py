"""What a checkpoint of a language model has learnt, on repeated random tokens (Olsson et al., 2022): each head's
previous-token and induction scores and first-token (sink) share, and the loss on the repeats: one row of a series
(a model across its training, `viz_model.series`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..kinds.language_model import LanguageModel
from ..modeldir.series import Series
from ..training_series import check_same_model, load_step
from .lm_head_roles import REPEATED_COPIES, REPEATED_LENGTH, REPEATED_SAMPLES, maps_table, repeated_sequences
from .token_loss import token_losses

STEP_SCORES = ("previous_token", "induction", "first_token")


@dataclass
class CheckpointScores:
    """One checkpoint's scores.

    :ivar heads: one row per (layer, head): `STEP_SCORES` (and the other role scores), each a mean over the sequences
    :ivar loss_repeats: the mean next-token loss (nats) on the tokens of the second and later copies
    :ivar loss_first: the mean loss on the first copy's tokens after its first (what no earlier copy tells)
    """

    heads: pd.DataFrame
    loss_repeats: float
    loss_first: float

    def best(self, score: str) -> float:
        """The largest `score` of any head."""
        return float(self.heads[score].max())


@torch.inference_mode()
def checkpoint_scores(model: LanguageModel, length: int = REPEATED_LENGTH, copies: int = REPEATED_COPIES,
                      samples: int = REPEATED_SAMPLES, seed: int = 0) -> CheckpointScores:
    """`model`'s `CheckpointScores` over `samples` repeated random sequences (`repeated_sequences`, the same as the
    Head roles page's), one forced pass each."""
    sequences = repeated_sequences(model, length, copies, samples, seed)
    found, repeats, first = [], [], []
    for ids in sequences:
        out = model.forced_pass(ids, need_weights=True)
        found.append(([weights[0].double().cpu().numpy() for weights in out.attentions], ids))
        start = len(ids) - length * copies  # the start token(s) before the first copy
        targets = np.arange(1, len(ids))  # the position each loss predicts
        losses = token_losses(out.logits[0, :-1], ids[1:])
        first.append(losses[(targets > start) & (targets < start + length)].mean())
        repeats.append(losses[targets >= start + length].mean())
    return CheckpointScores(maps_table(found), float(np.mean(repeats)), float(np.mean(first)))


def series_scores(series: Series, device: str | torch.device = "cpu", length: int = REPEATED_LENGTH,
                  copies: int = REPEATED_COPIES, samples: int = REPEATED_SAMPLES,
                  on_step: Callable[[int, CheckpointScores], None] | None = None) -> dict[int, CheckpointScores]:
    """`checkpoint_scores` of every step of `series`, in training order, each step's model loaded in turn (and let
    go); one line where a step has another architecture or tokenizer than the first (`check_same_model`).
    `on_step(step, scores)` hears of each step as it is measured."""
    found: dict[int, CheckpointScores] = {}
    first: LanguageModel | None = None
    for step in series.steps:
        model = load_step(series, step, device)
        if first is None:
            first = model
        else:
            check_same_model(first, model, series.steps[0], step)
        found[step] = checkpoint_scores(model, length, copies, samples)
        if on_step is not None:
            on_step(step, found[step])
    return found
