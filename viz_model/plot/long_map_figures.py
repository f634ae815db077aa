"""A long prompt's maps drawn within reach of a browser: one head's map downsampled to blocks (the block's strongest
weight drawn, its mean and max on hover) or a window of it at full resolution, and the model view from
`map_summary.block_mean_grid`. Each reads its heads through `AttentionTrace.head_map`, never a whole layer."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analysis.map_summary import block_edges, block_mean_grid, check_size, head_blocks
from ..nn.kinds import KIND_TITLES, check_kind
from ..trace import AttentionTrace
from .figure_style import WEIGHT_SCALE, escape
from .map_figures import (
    Head,
    axis_names,
    check_head,
    check_layer,
    head_name,
    mark_selected,
    tiled_model_view,
)

DOWNSAMPLED_CELLS = 256  # the most blocks a downsampled map has a side
SUMMARY_CELLS = 32  # the blocks a side of each map of a long trace's model view
SUMMARY_ROWS = 8  # query rows read per block of a long trace's model view (every step-th row)
WINDOW_TOKENS = 128  # a map window's side


def _block_names(tokens: list[str], edges: np.ndarray) -> list[str]:
    """Each block's positions and its first token: "12–23 (the …)"."""
    return [f"{a}–{b - 1} ({tokens[a]} …)" if b - a > 1 else f"{a} ({tokens[a]})" for a, b in zip(edges, edges[1:])]


def colour_top(values: np.ndarray) -> float:
    """The colour scale's top for a long map's blocks: their 99th percentile (a few first rows' weights of 1 would
    leave every other block white), at least 1e-6."""
    return float(max(np.quantile(values, 0.99), 1e-6))


def downsampled_map(trace: AttentionTrace, kind: str, layer: int, head: int, cells: int = DOWNSAMPLED_CELLS
                    ) -> go.Figure:
    """One head's map as at most `cells` x `cells` blocks, each drawn as its strongest weight (a sharp link stays
    visible), its mean and max on hover; the axes are token positions, so lines drawn at a position fall right."""
    check_kind(kind)
    check_layer(trace, kind, layer)
    check_head(trace, head)
    cells = check_size(cells, "cells", 4096)
    _, n, m = trace.map_shape(kind, layer)
    rows, keys = block_edges(n, cells), block_edges(m, cells)
    means, maxes = head_blocks(trace, kind, layer, head, rows, keys)
    q_title, k_title = axis_names(kind)
    fig = go.Figure(go.Heatmap(
        z=maxes, x=keys - 0.5, y=rows - 0.5, customdata=means, colorscale=WEIGHT_SCALE, zmin=0.0,
        zmax=colour_top(maxes), colorbar=dict(title=dict(text="block max<br>(top: its 99th<br>percentile)")),
        name="attention",
        hovertemplate=("queries from %{y:.0f} · keys from %{x:.0f}<br>max weight %{z:.6f}<br>"
                       "mean weight %{customdata:.6f}<br>open a window for each token's weight<extra></extra>")))
    block_rows, block_keys = int(np.diff(rows).max()), int(np.diff(keys).max())
    fig.update_layout(
        title=dict(text=escape(f"{KIND_TITLES[kind]}: layer {layer + 1}, {head_name(head)} · {n} x {m} tokens "
                               f"drawn as blocks of up to {block_rows} x {block_keys} (each its strongest weight)")),
        height=760, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)",
        xaxis=dict(title=dict(text=f"{k_title} (position)"), range=[-0.5, m - 0.5], showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text=f"{q_title} (position)"), range=[n - 0.5, -0.5], showgrid=False, zeroline=False))
    return fig


def map_window(trace: AttentionTrace, kind: str, layer: int, head: int, first_row: int, first_key: int,
               size: int = WINDOW_TOKENS) -> go.Figure:
    """The exact weights of one head over query rows `first_row` on and keys `first_key` on (`size` of each, fewer
    at the end), read alone; tokens and positions on the axes and on hover."""
    check_kind(kind)
    check_layer(trace, kind, layer)
    check_head(trace, head)
    _, n, m = trace.map_shape(kind, layer)
    for value, name, high in ((first_row, "first_row", n - 1), (first_key, "first_key", m - 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= high:
            raise ValueError(f"{name} must be an integer from 0 to {high}, got {value!r}")
    size = check_size(size, "size", 1024)
    rows, cols = range(first_row, min(n, first_row + size)), range(first_key, min(m, first_key + size))
    weights = trace.head_map(kind, layer, int(head), slice(rows.start, rows.stop))[:, cols.start:cols.stop]
    queries, keys = trace.axes(kind)
    custom = np.empty((*weights.shape, 2), dtype=object)
    for i, r in enumerate(rows):
        custom[i, :, 0] = f"{r}: {escape(queries[r])}"
    for j, c in enumerate(cols):
        custom[:, j, 1] = f"{c}: {escape(keys[c])}"
    q_title, k_title = axis_names(kind)
    fig = go.Figure(go.Heatmap(
        z=weights, x=list(cols), y=list(rows), customdata=custom, colorscale=WEIGHT_SCALE, zmin=0.0,
        zmax=float(max(weights.max(), 1e-6)), colorbar=dict(title=dict(text="weight")), name="attention",
        hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.6f}<extra></extra>"))

    def axis(positions: range, tokens: list[str], title: str, reverse: bool = False) -> dict:
        shown = positions[::max(1, len(positions) // 32)]  # at most ~32 labels a side
        return dict(title=dict(text=title), tickmode="array", tickvals=list(shown),
                    ticktext=[f"{p} {escape(tokens[p])}" for p in shown], showgrid=False, zeroline=False,
                    range=[positions[-1] + 0.5, positions[0] - 0.5] if reverse else [positions[0] - 0.5,
                                                                                     positions[-1] + 0.5])
    fig.update_layout(
        title=dict(text=escape(f"{KIND_TITLES[kind]}: layer {layer + 1}, {head_name(head)} · exact weights of "
                               f"queries {rows.start}–{rows.stop - 1} x keys {cols.start}–{cols.stop - 1} "
                               f"(of {n} x {m})")),
        height=760, margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor="rgba(0,0,0,0)",
        xaxis=axis(cols, keys, k_title), yaxis=axis(rows, queries, q_title, reverse=True))
    fig.update_xaxes(tickangle=-45)
    return fig


def select_map(fig: go.Figure, trace: AttentionTrace, kind: str, aggregate: str | None,
               selected: tuple[int, Head] | None, cells: int = SUMMARY_CELLS) -> go.Figure:
    """`summary_model_view`'s figure with the `selected` (layer, head) map framed."""
    heads, n, m = trace.map_shape(kind, 0)
    tile = (len(block_edges(n, cells)) - 1, len(block_edges(m, cells)) - 1)
    return mark_selected(fig, len(trace.attentions(kind)), [aggregate] if aggregate else list(range(heads)), tile,
                         selected)


def summary_model_view(trace: AttentionTrace, kind: str, aggregate: str | None = None,
                       selected: tuple[int, Head] | None = None, cells: int = SUMMARY_CELLS) -> go.Figure:
    """The model view of a long trace: every layer x head as `block_mean_grid`'s block means (at most `cells` x
    `cells`, over `SUMMARY_ROWS` query rows a block), the title saying so; a click selects a map as in
    `map_figures.model_view`."""
    check_kind(kind)
    _, n, m = trace.map_shape(kind, 0)
    step = max(1, n // (cells * SUMMARY_ROWS))
    grid = block_mean_grid(trace, kind, cells, step)
    queries, keys = trace.axes(kind)
    blocks = f"{int(np.diff(grid.row_edges).max())} x {int(np.diff(grid.key_edges).max())}"
    note = f" · block means of {blocks} tokens" + ("" if step == 1 else f", 1 query row in {step}")
    return tiled_model_view(list(grid.cells), _block_names(queries, grid.row_edges),
                            _block_names(keys, grid.key_edges), kind, aggregate, selected, note, exact=False)
