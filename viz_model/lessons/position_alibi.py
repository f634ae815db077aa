"""ALiBi in a loaded language model (BLOOM): each head's slope and the bias it puts on the scores at each distance."""

from __future__ import annotations

import numpy as np

from ..config import ModelConfig
from ..nn.alibi import alibi_slopes
from .position_parts import LessonError, _check_length


def model_slopes(config: ModelConfig) -> np.ndarray:
    """``(heads,)`` the slopes m_h of the loaded model's heads (BLOOM's rule for any head count)."""
    if config.positional != "alibi":
        raise LessonError(f"this model's positions are {config.positional}, not ALiBi: it has no slopes to show")
    return alibi_slopes(config.heads, config.alibi_max_bias).double().numpy()


def distance_bias(config: ModelConfig, distances: int) -> np.ndarray:
    """``(heads, distances)``: ``-m_h · Δ``, what each head adds to the score of a key Δ = 0 .. distances-1 tokens
    before the query."""
    _check_length(distances, high=1 << 20)
    return -model_slopes(config)[:, None] * np.arange(distances)[None, :]


def half_distance(config: ModelConfig, drop: float = 1.0) -> np.ndarray:
    """``(heads,)``: the distance at which each head's bias has taken `drop` off the score (1: a factor e off the
    weight, all else equal): ``drop / m_h``."""
    if not drop > 0:
        raise LessonError(f"the drop must be a positive number, got {drop!r}")
    return drop / model_slopes(config)
