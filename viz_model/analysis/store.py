"""Precomputed analysis tables kept in a model directory, under ``analysis/``, read and written with checks.

- ``analysis/head_stats.csv``: per-head statistics and roles (`viz-model analyze --out DIR/analysis/head_stats.csv`,
  or `write_head_stats`), optionally with ``analysis/head_stats_sentences.txt``, the analysed source sentences one
  per line, so that a role's example sentence (``example_sentence``, an index) can be quoted;
- ``analysis/head_importance.csv``: the loss rise when each head alone is switched off
  (`viz-model importance --out DIR/analysis/head_importance.csv`).

Files are read only through `viz_model.modeldir.checkpoint.model_file` (a regular file inside the directory, no link
out of
it) and at most `MAX_TABLE_BYTES`; every problem is a `CheckpointError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..config import ModelConfig
from ..modeldir.checkpoint import CheckpointError, model_file
from ..nn.kinds import ATTENTION_KINDS
from .ablation import layer_counts
from .corpus_attention import CorpusAnalysis
from .head_stats import HEAD_COLUMNS, STATISTICS, head_roles
from .tables import write_table

ANALYSIS_DIR = "analysis"
HEAD_STATS_FILE = f"{ANALYSIS_DIR}/head_stats.csv"
HEAD_STATS_SENTENCES_FILE = f"{ANALYSIS_DIR}/head_stats_sentences.txt"
HEAD_IMPORTANCE_FILE = f"{ANALYSIS_DIR}/head_importance.csv"
HEAD_STATS_COLUMNS = (*HEAD_COLUMNS, *STATISTICS)
IMPORTANCE_COLUMNS = (*HEAD_COLUMNS, "nll_rise")
ROLE_COLUMNS = ("role", "role_statistic", "role_score", "example_sentence", "example_value")
MAX_TABLE_BYTES = 16 * 1024**2


def table_exists(directory: str | Path, name: str) -> bool:
    """Whether the model directory has the analysis file `name` (it may still be refused when read)."""
    path = Path(directory) / name
    return path.is_file() or path.is_symlink()


def _checked_path(directory: Path, name: str) -> Path:
    return model_file(directory, name, MAX_TABLE_BYTES)


def _read_csv(directory: Path, name: str) -> pd.DataFrame:
    path = _checked_path(directory, name)
    try:
        return pd.read_csv(path, encoding="utf-8")
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError, OSError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"{path}: not a readable CSV table ({reason})") from None


def _integers(table: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
    if not np.isfinite(values).all() or (values != np.round(values)).any() or (values < 0).any():
        raise CheckpointError(f"{path}: column {column!r} must hold whole numbers from 0")
    return values.astype(np.int64)


def check_head_table(table: pd.DataFrame, required: tuple[str, ...], path: Path,
                     config: ModelConfig | None = None) -> pd.DataFrame:
    """`table` with integer layer / head and numeric `required` columns, or a `CheckpointError` naming `path`: a
    column missing, an unknown kind, a head twice, or (given `config`) a layer or head the model does not have."""
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise CheckpointError(f"{path}: columns {', '.join(missing)} are missing (it needs {', '.join(required)})")
    if table.empty:
        raise CheckpointError(f"{path}: the table has no rows")
    table = table.copy()
    bad_kinds = sorted(set(map(str, table["kind"])) - set(ATTENTION_KINDS))
    if bad_kinds:
        raise CheckpointError(f"{path}: unknown attention kind {bad_kinds[0][:40]!r} "
                              f"(use {', '.join(ATTENTION_KINDS)})")
    table["layer"], table["head"] = _integers(table, "layer", path), _integers(table, "head", path)
    if table.duplicated(list(HEAD_COLUMNS)).any():
        raise CheckpointError(f"{path}: a head appears more than once")
    for column in required[len(HEAD_COLUMNS):]:
        values = pd.to_numeric(table[column], errors="coerce")
        if (values.isna() & table[column].notna()).any() or np.isinf(values).any():
            raise CheckpointError(f"{path}: column {column!r} must hold numbers")
        table[column] = values.astype(np.float64)
    if config is not None:
        _check_sizes(table, config, path)
    return table.reset_index(drop=True)


def _check_sizes(table: pd.DataFrame, config: ModelConfig, path: Path) -> None:
    counts = layer_counts(config)
    for kind, layer, head in table[list(HEAD_COLUMNS)].itertuples(index=False):
        if layer >= counts[kind] or head >= config.heads:
            raise CheckpointError(f"{path}: {kind} layer {layer} head {head} (0-based) does not exist in this model "
                                  f"({counts[kind]} {kind} layers, {config.heads} heads): a table of another model?")


def read_head_stats(directory: str | Path, config: ModelConfig | None = None) -> pd.DataFrame | None:
    """The model directory's per-head statistics with roles (`head_roles` fills them in when the file lacks any of
    `ROLE_COLUMNS`), or None when there is no such file."""
    directory = Path(directory)
    if not table_exists(directory, HEAD_STATS_FILE):
        return None
    path = directory / HEAD_STATS_FILE
    table = check_head_table(_read_csv(directory, HEAD_STATS_FILE), HEAD_STATS_COLUMNS, path, config)
    if "sentences" in table.columns:
        table["sentences"] = pd.to_numeric(table["sentences"], errors="coerce")
    if not all(c in table.columns for c in ROLE_COLUMNS):
        return head_roles(table)
    example = pd.to_numeric(table["example_sentence"], errors="coerce")
    if example.isna().any() or (example < -1).any() or (example != example.round()).any():
        raise CheckpointError(f"{path}: column 'example_sentence' must hold sentence numbers from 0 (-1: none)")
    return table.assign(role=table["role"].astype(str), example_sentence=example.astype(np.int64),
                        role_score=pd.to_numeric(table["role_score"], errors="coerce"),
                        example_value=pd.to_numeric(table["example_value"], errors="coerce"))


def read_head_stats_sentences(directory: str | Path) -> list[str] | None:
    """The sentences the statistics were computed over (one per line), or None when the directory has none."""
    directory = Path(directory)
    if not table_exists(directory, HEAD_STATS_SENTENCES_FILE):
        return None
    path = _checked_path(directory, HEAD_STATS_SENTENCES_FILE)
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (UnicodeDecodeError, OSError) as err:
        raise CheckpointError(f"{path}: not readable UTF-8 text ({type(err).__name__})") from None


def read_head_importance(directory: str | Path, config: ModelConfig | None = None) -> pd.DataFrame | None:
    """The model directory's head importance table (`ablation.head_importance`), or None when there is none."""
    directory = Path(directory)
    if not table_exists(directory, HEAD_IMPORTANCE_FILE):
        return None
    table = check_head_table(_read_csv(directory, HEAD_IMPORTANCE_FILE), IMPORTANCE_COLUMNS,
                             directory / HEAD_IMPORTANCE_FILE, config)
    for column in ("nll", "nll_intact", "bleu", "bleu_intact", "bleu_drop"):
        if column in table.columns:
            table[column] = pd.to_numeric(table[column], errors="coerce")
    return table


def write_head_stats(directory: str | Path, analysis: CorpusAnalysis) -> Path:
    """Write `analysis` (from `analyze_corpus`) into the model directory: the heads table and its example sentences.

    Only the sentences the table names as examples are kept (other lines blank, so line numbers still match): a
    model directory carries a few quotes of the corpus it was analysed on, not a copy of it.
    """
    directory = Path(directory)
    (directory / ANALYSIS_DIR).mkdir(exist_ok=True)
    used = set(pd.to_numeric(analysis.heads["example_sentence"], errors="coerce").dropna().astype(int))
    lines = [s if i in used else "" for i, s in enumerate(analysis.sources)]
    (directory / HEAD_STATS_SENTENCES_FILE).write_text("".join(f"{s}\n" for s in lines), encoding="utf-8")
    return write_table(analysis.heads, directory / HEAD_STATS_FILE)


def write_head_importance(directory: str | Path, importance: pd.DataFrame) -> Path:
    """Write a `head_importance` table into the model directory."""
    directory = Path(directory)
    (directory / ANALYSIS_DIR).mkdir(exist_ok=True)
    return write_table(importance, directory / HEAD_IMPORTANCE_FILE)
