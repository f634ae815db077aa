"""A long prompt's masks and rows drawn within reach of a browser: a mask as blocks (each the share of its cells that
may attend) or a window of its exact cells (`masking_figures.mask_matrix_figure`, moved to the window's positions), and
a figure's token axis turned into a positions axis (tokens on hover)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ..analysis.map_summary import block_edges, check_size
from ..on_demand import reading
from .decoding_figures import causal_growth_figure
from .figure_style import escape
from .long_map_figures import DOWNSAMPLED_CELLS
from .masking_figures import mask_matrix_figure

MASK_COLOURS = [[0, "#d9d9d9"], [1, "#3182bd"]]  # masked grey, visible blue: `mask_matrix_figure`'s
MASK_WINDOW_TOKENS = 48  # a mask window's side: every cell drawn, "−∞" written in the masked ones


def block_shares(mask: np.ndarray, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``(row blocks, key blocks)`` float32: the share of each block's cells that may attend (`rows`, `keys`:
    `block_edges`)."""
    per_row = np.add.reduceat(np.asarray(mask, dtype=bool).view(np.uint8), keys[:-1], axis=1, dtype=np.int64)
    sums = np.add.reduceat(per_row, rows[:-1], axis=0)
    return (sums / np.outer(np.diff(rows), np.diff(keys))).astype(np.float32)


def downsampled_mask(mask: np.ndarray, title: str, cells: int = DOWNSAMPLED_CELLS) -> go.Figure:
    """A ``(q, k)`` boolean mask (True = may attend) as at most `cells` x `cells` blocks, each coloured by the share
    of its cells that may attend; the axes are positions, and the title says it is drawn as blocks."""
    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 2 or not mask.size:
        raise ValueError(f"a mask must be a non-empty (queries, keys) array, got shape {mask.shape}")
    cells = check_size(cells, "cells", 4096)
    q, k = mask.shape
    rows, keys = block_edges(q, cells), block_edges(k, cells)
    shares = block_shares(mask, rows, keys)
    fig = go.Figure(go.Heatmap(
        z=shares, x=keys - 0.5, y=rows - 0.5, colorscale=MASK_COLOURS, zmin=0.0, zmax=1.0,
        colorbar=dict(title=dict(text="share that<br>may attend")), name="mask",
        hovertemplate="queries from %{y:.0f} · keys from %{x:.0f}<br>%{z:.3f} of the block may attend"
                      "<extra></extra>"))
    block_rows, block_keys = int(np.diff(rows).max()), int(np.diff(keys).max())
    fig.update_layout(
        title=dict(text=escape(f"{title} · {q} x {k} tokens drawn as blocks of up to {block_rows} x {block_keys} "
                               "(each the share of its cells that may attend)")),
        height=640, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(title=dict(text="keys (position)"), range=[-0.5, k - 0.5], showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text="queries (position)"), range=[q - 0.5, -0.5], showgrid=False, zeroline=False))
    return fig


def window_start(position: int, length: int, size: int = MASK_WINDOW_TOKENS) -> int:
    """The first position of a `size`-token window centred on `position` and kept inside ``0..length-1``."""
    return max(0, min(position - size // 2, length - size))


def placed(fig: go.Figure, first_row: int, first_key: int) -> go.Figure:
    """`fig`, a heatmap drawn over cells ``0..`` (as `mask_matrix_figure` draws one), moved to start at query
    `first_row` and key `first_key`: its cells, ticks and ranges (its hover then names true positions)."""
    for trace in fig.data:
        trace.update(x=[first_key + x for x in trace.x], y=[first_row + y for y in trace.y])
    for axis, first in ((fig.layout.xaxis, first_key), (fig.layout.yaxis, first_row)):
        axis.update(tickvals=[first + v for v in axis.tickvals], range=[first + r for r in axis.range])
    return fig


def mask_window(mask: np.ndarray, query_labels: list[str], key_labels: list[str], first_row: int, first_key: int,
                title: str, size: int = MASK_WINDOW_TOKENS) -> go.Figure:
    """The exact cells of a ``(q, k)`` mask over queries `first_row` on and keys `first_key` on (`size` of each,
    fewer at the end), each labelled with its position and token; the title says which part of the mask it is."""
    mask = np.asarray(mask, dtype=bool)
    q, k = mask.shape
    for value, name, high in ((first_row, "first_row", q - 1), (first_key, "first_key", k - 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= high:
            raise ValueError(f"{name} must be an integer from 0 to {high}, got {value!r}")
    size = check_size(size, "size", 256)
    rows, cols = range(first_row, min(q, first_row + size)), range(first_key, min(k, first_key + size))
    fig = mask_matrix_figure(mask[rows.start:rows.stop, cols.start:cols.stop],
                             [f"{r} {query_labels[r]}" for r in rows], [f"{c} {key_labels[c]}" for c in cols],
                             f"{title} · every cell of queries {rows.start}–{rows.stop - 1} x keys "
                             f"{cols.start}–{cols.stop - 1} (of {q} x {k})")
    return placed(fig, rows.start, cols.start)


def positions_axis(fig: go.Figure, title: str) -> go.Figure:
    """`fig`'s x axis of one tick a token turned into a positions axis (Plotly picks the ticks; the tokens stay on
    hover) and its cells drawn without gaps: a row of thousands of keys."""
    fig.update_traces(xgap=0)
    fig.update_xaxes(tickmode="auto", tickvals=None, ticktext=None, dtick=None, tickangle=0,
                     title=dict(text=title))
    return fig


def token_axis(fig: go.Figure, tokens: int, title: str) -> go.Figure:
    """`fig` as drawn, a tick a token, where its x axis of `tokens` keys is read whole (`on_demand.reading`), else
    with `positions_axis` (titled `title`)."""
    return fig if reading(1, tokens) == "whole" else positions_axis(fig, title)


def mask_drawings(mask: np.ndarray, query_labels: list[str], key_labels: list[str], title: str, around: int
                  ) -> list[tuple[go.Figure, str]]:
    """A ``(q, k)`` mask drawn cell by cell (`mask_matrix_figure`) where it is read whole (`on_demand.reading`), else
    as blocks and a window of its cells around position `around`: each figure with its name's suffix."""
    if reading(*mask.shape) == "whole":
        return [(mask_matrix_figure(mask, query_labels, key_labels, title), "")]
    first = window_start(around, max(mask.shape))
    return [(downsampled_mask(mask, title), ""),
            (mask_window(mask, query_labels, key_labels, first, first, title), "-window")]



def causal_step_figure(labels: Sequence[str], t: int, rows: int = MASK_WINDOW_TOKENS) -> go.Figure:
    """The causal mask after the step read at position `t` (`causal_growth_figure`): every row where it is read whole
    (`on_demand.reading`), else its last `rows` rows (their cells exact), the title saying which."""
    if reading(len(labels), len(labels)) == "whole":
        return causal_growth_figure(labels, t)
    first = max(0, t - rows + 1)
    fig = causal_growth_figure([f"{p} {labels[p]}" for p in range(first, t + 1)], t - first)
    fig.update_layout(title=dict(text=f"Causal mask after step {t + 1}, its last {t + 1 - first} rows and columns "
                                      f"(positions {first}–{t} of 0–{t}): the new row (red) sees keys 0..{t}"))
    return placed(fig, first, first)


def token_bars(values: np.ndarray, ticks: list[str], **bar: Any) -> go.Figure:
    """A bar a token (`bar`: the `go.Bar`'s other settings), named by `ticks` where they are read whole
    (`on_demand.reading`), else drawn at its position on a "key position" axis, its tick on hover."""
    whole = reading(1, len(ticks)) == "whole"
    fig = go.Figure(go.Bar(x=ticks if whole else list(range(len(ticks))), y=values, customdata=ticks, **bar))
    return fig if whole else fig.update_xaxes(title=dict(text="key position (hover for the token)"))
