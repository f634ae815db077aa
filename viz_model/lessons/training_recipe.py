"""The training recipe's numbers: the trainer's learning-rate schedule (`viz_model.config.recipe`), the label-smoothed
target read off the loss itself, and a model directory's training log.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..config import ConfigError, TrainConfig, recipe
from ..config.recipe import cooldown_factor, label_smoothed_loss, learning_rate
from ..modeldir.checkpoint import TRAINING_LOG, CheckpointError, model_file
from ..modeldir.training_facts import TrainingFacts, read_log
from ..tokenization.tokenizer import PAD_ID
from .lesson_inputs import InputError, check_float, whole_number


# --- the training recipe -----------------------------------------------------------------------------------------
def recipe_summary(facts: TrainingFacts) -> str:
    """The schedule and loss settings of a run, in one line (from its training facts, not from the card)."""
    scale = f"peak lr {facts.lr_peak:g}" if facts.lr_peak else f"lr scale {facts.lr_scale:g}"
    cooldown = f", cooldown over the last {facts.cooldown_epochs} of {facts.epochs} epochs" if facts.cooldown_epochs \
        else ""
    return (f"{facts.warmup_steps:,} warm-up steps, {scale}{cooldown}, label smoothing {facts.label_smoothing:g}; "
            f"trained for {facts.trained_epochs} epochs ({facts.steps:,} steps, {facts.steps_per_epoch:,} per epoch)")


def schedule_config(d_model: int, warmup: int, lr_scale: float = 1.0, lr_peak: float = 0.0, epochs: int = 1,
                    cooldown_epochs: int = 0) -> TrainConfig:
    """A TrainConfig carrying only what the trainer's schedule reads (d_model, warm-up, scale or peak, and the
    run's epochs with its cooldown)."""
    d_model = whole_number("d_model", d_model, 1, 16_384)
    warmup = whole_number("warm-up steps", warmup, 1, 10_000_000)
    lr_scale = check_float("the lr scale", lr_scale, 0.0, 1000.0)
    lr_peak = check_float("the peak learning rate", lr_peak, 0.0, 1.0)
    epochs = whole_number("the number of epochs", epochs, 1, 100_000)
    cooldown_epochs = whole_number("the cooldown epochs", cooldown_epochs, 0, 100_000)
    try:
        return recipe.schedule_config(d_model, warmup, lr_scale, lr_peak, epochs, cooldown_epochs)
    except ConfigError as err:
        raise InputError(str(err)) from None


def schedule(cfg: TrainConfig, steps: Sequence[int], epoch_steps: int = 1) -> np.ndarray:
    """The learning rate the trainer uses at each 1-based step: `learning_rate` times `cooldown_factor`, for a run
    of `cfg.epochs` epochs of `epoch_steps` steps each."""
    epoch_steps = whole_number("the steps per epoch", epoch_steps, 1, 10_000_000)
    return np.array([learning_rate(int(s), cfg) * cooldown_factor((int(s) - 1) // epoch_steps,
                                                                   (int(s) - 1) % epoch_steps, epoch_steps, cfg)
                     for s in steps], dtype=np.float64)


def schedule_steps(total: int, points: int = 400, marks: Sequence[int] = ()) -> np.ndarray:
    """Steps 1..total to draw a schedule at (`points` of them, plus `marks`, e.g. the warm-up, where it peaks)."""
    total = whole_number("the number of steps", total, 10, 10_000_000)
    grid = np.linspace(1, total, points).round().astype(int)
    return np.unique(np.concatenate([grid, [m for m in marks if 1 <= m <= total]]).astype(int))


def smoothed_target(epsilon: float, vocab: int, target: int = 1) -> np.ndarray:
    """The distribution the training loss pulls the model towards, read off the loss itself.

    `label_smoothed_loss` (the trainer's) is differentiated at uniform logits: its gradient is ``p − q``, so the
    target is ``q = p − grad``. Analytically ``q = (1 − ε) one_hot(target) + ε / V``.
    """
    epsilon = check_float("ε (label smoothing)", epsilon, 0.0, 0.99)
    vocab = whole_number("the vocabulary size", vocab, 2, 1_000_000)
    target = whole_number("the target token", target, 0, vocab - 1)
    if target == PAD_ID:
        raise InputError(f"token {PAD_ID} is <pad>, which the loss skips; pick another target token")
    logits = torch.zeros(1, vocab, dtype=torch.float64, requires_grad=True)
    loss, _ = label_smoothed_loss(logits, torch.tensor([target]), epsilon)
    loss.backward()
    assert logits.grad is not None
    probs = torch.softmax(logits.detach()[0], dim=-1)
    return (probs - logits.grad[0]).numpy()


def training_events(directory: Path | None) -> list[dict[str, Any]]:
    """The model directory's JSON-lines training log (empty when it has none), read under the checks every model
    file gets (inside the directory, no link out of it, a size cap): a bad one is an `InputError` naming it."""
    if directory is None or not (directory / TRAINING_LOG).exists():
        return []
    try:
        return read_log(model_file(directory, TRAINING_LOG))
    except CheckpointError as err:
        raise InputError(str(err)) from None
