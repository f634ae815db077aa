"""Bounded summaries of every head's map, for the model view (layers x heads) of a long prompt: each map averaged
over blocks to a small grid, or its top keys per query row. Made head by head, a block of rows at a time, so no more
than one block of one head's map is held at once, whether the trace keeps its maps or makes them on demand."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..trace import AttentionTrace

ROWS_AT_ONCE = 256  # query rows of one head's map made at a time
MAX_GRID = 256
MAX_TOP_KEYS = 64


@dataclass
class GridSummary:
    """Every head's map of one kind averaged over blocks: the model view's cells, and how they were made.

    :ivar kind: "encoder", "decoder" or "cross"
    :ivar method: "block mean" (each cell the mean weight of its block of query rows and keys), or "block mean of
        one query row in 8" (its mean over those rows alone)
    :ivar cells: ``(layers, heads, row_blocks, key_blocks)`` float32
    :ivar row_edges: ``(row_blocks + 1,)`` the first query row of each block, then the row count
    :ivar key_edges: ``(key_blocks + 1,)`` the same for the keys
    """

    kind: str
    method: str
    cells: np.ndarray
    row_edges: np.ndarray
    key_edges: np.ndarray


@dataclass
class TopKeys:
    """The top keys of every query row of one head: what a long map shows when not drawn whole.

    :ivar method: "top k keys per row"
    :ivar keys: ``(n, k)`` int64 the keys, most attended first
    :ivar weights: ``(n, k)`` float32 their weights
    :ivar kept: ``(n,)`` float32 the share of each row's weight the k keys hold
    """

    method: str
    keys: np.ndarray
    weights: np.ndarray
    kept: np.ndarray


def check_size(value: object, name: str, high: int) -> int:
    """`value` when it is an integer from 1 to `high`; else a one-line ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ValueError(f"{name} must be an integer from 1 to {high}, got {value!r}")
    return value


def row_blocks(trace: AttentionTrace, kind: str, layer: int, head: int, step: int = 1
               ) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, ``(rows, keys)`` map) of one head, `ROWS_AT_ONCE` rows at a time (`step`: every step-th row)."""
    _, n, _ = trace.map_shape(kind, layer)
    for start in range(0, n, ROWS_AT_ONCE * step):
        yield start, trace.head_map(kind, layer, head, slice(start, min(n, start + ROWS_AT_ONCE * step), step))


def block_edges(length: int, blocks: int) -> np.ndarray:
    """``(min(blocks, length) + 1,)`` edges cutting `length` into near-equal blocks."""
    return np.linspace(0, length, min(blocks, length) + 1).round().astype(np.int64)


def head_blocks(trace: AttentionTrace, kind: str, layer: int, head: int, rows: np.ndarray, keys: np.ndarray,
                step: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(mean, max) ``(row blocks, key blocks)`` float32 of one head's map over the blocks `rows` and `keys`
    (`block_edges`), made `ROWS_AT_ONCE` rows at a time (`step`: over every step-th query row alone)."""
    _, n, _ = trace.map_shape(kind, layer)
    block_of_row = np.searchsorted(rows, np.arange(0, n, step), side="right") - 1
    sums = np.zeros((len(rows) - 1, len(keys) - 1), dtype=np.float64)
    maxes = np.zeros(sums.shape, dtype=np.float32)
    for start, block in row_blocks(trace, kind, layer, head, step):
        block_rows = block_of_row[start // step:start // step + len(block)]
        np.add.at(sums, block_rows, np.add.reduceat(block, keys[:-1], axis=1))
        np.maximum.at(maxes, block_rows, np.maximum.reduceat(block, keys[:-1], axis=1))
    counts = np.bincount(block_of_row, minlength=len(rows) - 1)
    if not counts.all():
        raise ValueError(f"step {step} leaves a block of query rows with no row read")
    return (sums / np.outer(counts, np.diff(keys))).astype(np.float32), maxes


def block_mean_grid(trace: AttentionTrace, kind: str, size: int = 64, step: int = 1) -> GridSummary:
    """Every head's map of `kind` as the mean of at most `size` x `size` blocks, made head by head (a long trace's
    maps made on demand are never all held); `step` > 1: each block's mean over every step-th query row."""
    size = check_size(size, "size", MAX_GRID)
    step = check_size(step, "step", 4096)
    layers = len(trace.attentions(kind))
    if not layers:
        raise ValueError(f"this trace has no {kind} attention to summarise")
    heads, n, m = trace.map_shape(kind, 0)
    rows, keys = block_edges(n, size), block_edges(m, size)
    cells = np.zeros((layers, heads, len(rows) - 1, len(keys) - 1), dtype=np.float32)
    for layer in range(layers):
        for head in range(heads):
            cells[layer, head] = head_blocks(trace, kind, layer, head, rows, keys, step)[0]
    return GridSummary(kind, "block mean" if step == 1 else f"block mean of one query row in {step}", cells,
                       rows, keys)


def top_keys(trace: AttentionTrace, kind: str, layer: int, head: int, k: int = 8) -> TopKeys:
    """The `k` most attended keys of each query row of one head, with their weights and the share of the row's
    weight they keep (Neuronpedia keeps 8)."""
    k = check_size(k, "k", MAX_TOP_KEYS)
    _, n, m = trace.map_shape(kind, layer)
    k = min(k, m)
    keys = np.zeros((n, k), dtype=np.int64)
    weights = np.zeros((n, k), dtype=np.float32)
    for start, block in row_blocks(trace, kind, layer, head):
        part = np.argpartition(-block, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(block, part, axis=1), axis=1, kind="stable")
        chosen = np.take_along_axis(part, order, axis=1)
        keys[start:start + len(block)] = chosen
        weights[start:start + len(block)] = np.take_along_axis(block, chosen, axis=1)
    return TopKeys("top k keys per row", keys, weights, weights.sum(axis=1))
