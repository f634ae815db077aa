"""Write analysis tables (pandas DataFrames) as CSV or Parquet, chosen by the file suffix, with clear errors."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pandas as pd

TABLE_SUFFIXES = (".csv", ".parquet")


def check_table_path(path: str | Path) -> Path:
    """`path` if a table can be written there: a .csv or .parquet name in an existing directory (and, for
    Parquet, pyarrow or fastparquet installed); otherwise a `ValueError` that says what to change."""
    path = Path(path)
    if path.suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path}: the table format is chosen by the suffix: use .csv or .parquet, "
                         f"not {path.suffix or 'no suffix'!r}")
    if path.is_dir():
        raise ValueError(f"{path} is a directory; give a file name ending in .csv or .parquet")
    if not path.parent.is_dir():
        raise ValueError(f"{path}: directory {path.parent} does not exist")
    if path.suffix == ".parquet" and not any(importlib.util.find_spec(m) for m in ("pyarrow", "fastparquet")):
        raise ValueError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow); or write .csv")
    return path


def write_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write `table` without its index to a .csv or .parquet file, whole or not at all: it is written next to
    `path` and renamed over it once complete (an interrupted run leaves no partial table)."""
    path = check_table_path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        if path.suffix == ".csv":
            table.to_csv(partial, index=False)
        else:
            table.to_parquet(partial, index=False)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
