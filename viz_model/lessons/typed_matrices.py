"""Matrices typed into a lesson's tables: parsed cell by cell, shown as editable text, resized, labelled."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .lesson_inputs import InputError

MAX_CELL = 10_000.0  # the largest magnitude a typed matrix cell may have
MAX_ROWS = 8  # inputs of the hand example
MAX_COLS = 8  # d_model / d_k / d_v of the hand example


# --- typed matrices ----------------------------------------------------------------------------------------------
def parse_matrix(table: pd.DataFrame | Sequence[Sequence[Any]], name: str) -> np.ndarray:
    """A float64 matrix from an edited table whose cells may be text; `InputError` names the first bad cell."""
    frame = table if isinstance(table, pd.DataFrame) else pd.DataFrame(list(table))
    rows, cols = frame.shape
    if rows == 0 or cols == 0:
        raise InputError(f"{name} is empty: it needs at least one row and one column")
    if rows > MAX_ROWS or cols > MAX_COLS:
        raise InputError(f"{name} is {rows} × {cols}; at most {MAX_ROWS} × {MAX_COLS} here (a lesson, not a model)")
    out = np.zeros((rows, cols), dtype=np.float64)
    for i in range(rows):
        for j in range(cols):
            cell = frame.iat[i, j]
            where = f"{name}, row {i + 1}, column {j + 1}"
            if cell is None or (isinstance(cell, float) and math.isnan(cell)) or (
                    isinstance(cell, str) and not cell.strip()):
                raise InputError(f"{where} is empty: type a number")
            if isinstance(cell, (bool, np.bool_)):
                raise InputError(f"{where} is {cell!r}, not a number")
            try:
                value = float(cell.strip().replace("−", "-")) if isinstance(cell, str) else float(cell)
            except (TypeError, ValueError):
                raise InputError(f"{where} is {str(cell)[:20]!r}, not a number") from None
            if not math.isfinite(value):
                raise InputError(f"{where} is {value}: only finite numbers")
            if abs(value) > MAX_CELL:
                raise InputError(f"{where} is {value:g}: keep values within ±{MAX_CELL:,.0f} (larger ones only "
                                 "saturate the softmax and overflow the tables)")
            out[i, j] = value
    return out


def matrix_frame(values: np.ndarray, col_prefix: str) -> pd.DataFrame:
    """An editable table of a matrix: text cells (so any typing reaches `parse_matrix`), numbered columns and a plain
    row index (so the editor can add rows)."""
    values = np.asarray(values, dtype=np.float64)
    return pd.DataFrame([[f"{v:g}" for v in row] for row in values],
                        columns=[f"{col_prefix}{j + 1}" for j in range(values.shape[1])])


def resized(values: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """`values` cut or zero-padded to ``rows × cols``."""
    out = np.zeros((rows, cols), dtype=np.float64)
    r, c = min(rows, values.shape[0]), min(cols, values.shape[1])
    out[:r, :c] = values[:r, :c]
    return out


def labelled(values: np.ndarray, rows: Sequence[str] | str, cols: Sequence[str] | str) -> pd.DataFrame:
    """A matrix as a table with row and column labels (a prefix string numbers them from 1)."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    r = [f"{rows}{i + 1}" for i in range(values.shape[0])] if isinstance(rows, str) else list(rows)
    c = [f"{cols}{j + 1}" for j in range(values.shape[1])] if isinstance(cols, str) else list(cols)
    return pd.DataFrame(values, index=r, columns=c)
