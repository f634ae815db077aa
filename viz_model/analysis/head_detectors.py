"""Head detectors as TransformerLens's ``head_detector`` scores them: a pattern over one sequence's positions (query x
key, lower-triangular in a causal model: previous-token, duplicate-token, induction, or one the user draws) against
every head's map of that sequence."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..kinds.language_model import LanguageModel
from .lm_head_roles import check_map, sequence_maps

DETECTORS = ("duplicate_token", "previous_token", "induction")
MEASURES = ("mul", "abs")  # TransformerLens's error measures: weight inside the pattern, or 1 - mean row |difference|
DETECTOR_COLUMNS = ["layer", "head", "score"]


def previous_token_pattern(n: int) -> np.ndarray:
    """``(n, n)``: query i on key i - 1."""
    return np.eye(n, k=-1)


def duplicate_token_pattern(ids: Sequence[int]) -> np.ndarray:
    """``(n, n)``: query i on the earlier keys j < i holding its token."""
    tokens = np.asarray(ids)
    return np.tril((tokens[:, None] == tokens[None, :]).astype(np.float64), k=-1)


def induction_pattern(ids: Sequence[int]) -> np.ndarray:
    """``(n, n)``: query i on the keys j + 1 that followed an earlier copy of its token (j + 1 <= i)."""
    duplicate = duplicate_token_pattern(ids)
    shifted = np.zeros_like(duplicate)
    shifted[:, 1:] = duplicate[:, :-1]
    return np.tril(shifted)


def named_pattern(name: str, ids: Sequence[int]) -> np.ndarray:
    """The pattern `name` (one of `DETECTORS`) over `ids`."""
    if name == "previous_token":
        return previous_token_pattern(len(ids))
    if name == "duplicate_token":
        return duplicate_token_pattern(ids)
    if name == "induction":
        return induction_pattern(ids)
    raise ValueError(f"the detector must be one of {', '.join(DETECTORS)} or a matrix, got {name!r}")


def check_pattern(pattern: object, n: int) -> np.ndarray:
    """`pattern` as float64 when it is an ``(n, n)`` lower-triangular matrix of finite numbers; else one line."""
    try:
        matrix = np.asarray(pattern, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("a pattern is a matrix of numbers (query rows x key columns)") from None
    if matrix.shape != (n, n):
        raise ValueError(f"the pattern is {'x'.join(map(str, matrix.shape)) or 'a single number'}; this sequence of "
                         f"{n} tokens needs {n}x{n} (a row per query, a column per key)")
    if not np.isfinite(matrix).all():
        raise ValueError("the pattern holds a value that is not a finite number")
    if np.triu(matrix, k=1).any():
        raise ValueError("the pattern puts weight above the diagonal: a causal model's query never sees a later key")
    return matrix


def detection_scores(weights: np.ndarray, pattern: np.ndarray, *, exclude_bos: bool = False,
                     exclude_current_token: bool = False, measure: str = "mul") -> np.ndarray:
    """Per head of a causal map ``(heads, n, n)``, TransformerLens's score of `pattern` ``(n, n)``: "mul", the share
    of the head's weight that falls inside the pattern (`exclude_bos`: key 0's weight left out; `exclude_current_token`:
    each query's own); "abs", 1 - n x the mean absolute difference, rounded to 3 places as there."""
    w = check_map(weights).copy()
    matrix = check_pattern(pattern, w.shape[1])
    if measure == "abs":
        return 1 - np.round(np.abs(w - matrix).mean(axis=(1, 2)) * w.shape[1], 3)
    if measure != "mul":
        raise ValueError(f"the measure must be one of {', '.join(MEASURES)}, got {measure!r}")
    if exclude_bos:
        w[:, :, 0] = 0
    if exclude_current_token:
        w[:, np.arange(w.shape[1]), np.arange(w.shape[1])] = 0
    total = w.sum(axis=(1, 2))
    inside = (w * matrix).sum(axis=(1, 2))
    return np.divide(inside, total, out=np.full(len(total), np.nan), where=total > 0)


def detect_heads(model: LanguageModel, ids: Sequence[int], pattern: str | np.ndarray, *, exclude_bos: bool = False,
                 exclude_current_token: bool = False, measure: str = "mul") -> pd.DataFrame:
    """One row per (layer, head): the `detection_scores` of `pattern` (a name of `DETECTORS` or an ``(n, n)``
    matrix) on the model's maps of `ids`."""
    if not ids:
        raise ValueError("no tokens to detect a pattern on")
    matrix = named_pattern(pattern, ids) if isinstance(pattern, str) else check_pattern(pattern, len(ids))
    rows = []
    for layer, weights in enumerate(sequence_maps(model, ids)):
        scores = detection_scores(weights, matrix, exclude_bos=exclude_bos,
                                  exclude_current_token=exclude_current_token, measure=measure)
        rows += [{"layer": layer, "head": head, "score": float(score)} for head, score in enumerate(scores)]
    return pd.DataFrame(rows, columns=DETECTOR_COLUMNS)
