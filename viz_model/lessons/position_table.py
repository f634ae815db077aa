"""A learned table of positions (GPT-2's wpe) in the views the sinusoid lessons give: the similarity of its
positions and its principal components."""

from __future__ import annotations

import numpy as np

from ..kinds.language_model import LanguageModel
from ..nn.arrays import to_numpy
from .position_parts import LessonError


def learned_table(model: LanguageModel) -> np.ndarray:
    """``(max_positions, d_model)`` float64: the position vectors the model adds to its input (a learned table, or
    sinusoids where it was trained with them), row p for position p."""
    config = model.config
    if model.network.positions is None:
        raise LessonError(f"this model's positions are {config.positional}: it adds no table of positions to its "
                          "input")
    return to_numpy(model.network.positions(config.max_positions, 0)).astype(np.float64)


def cosine_similarity(table: np.ndarray) -> np.ndarray:
    """``(n, n)``: the cosine of every pair of rows (their direction alone: a learned table's norms vary)."""
    norms = np.linalg.norm(table, axis=1, keepdims=True)
    unit = table / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


def principal_components(table: np.ndarray, count: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The rows' coordinates ``(n, count)`` on the table's first `count` principal components (the rows centred)
    and the share of the variance each component explains ``(count,)``."""
    if table.ndim != 2 or table.shape[0] < 2:
        raise LessonError(f"principal components need a table of at least 2 rows, got shape {table.shape}")
    count = min(count, *table.shape)
    centred = table - table.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    variance = s ** 2
    explained = variance / variance.sum() if variance.sum() > 0 else np.zeros_like(variance)
    return u[:, :count] * s[:count], explained[:count]
