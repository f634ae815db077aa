"""Rows over a long prompt drawn as strips: a few rows of weights or scores (a rollout's row, one query's attention,
an attribution) over thousands of positions, one cell a position, and the positions that carry most of a row."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .figure_style import WEIGHT_SCALE, escape

TOP_TOKENS = 12  # positions a top list names
HOVER_CELLS = 60_000  # strips with at most this many cells name each cell's token on hover


def strip_figure(values: np.ndarray, tokens: Sequence[str], row_names: Sequence[str], title: str,
                 boundary: int | None = None) -> go.Figure:
    """``(rows, n)`` values over the `tokens`' positions, one strip a row (signed values on a diverging scale);
    `boundary`: a line before that position (where the prompt ends)."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    rows, n = values.shape
    if len(row_names) != rows or len(tokens) != n:
        raise ValueError(f"{rows} x {n} values need {rows} row names and {n} tokens, got {len(row_names)} and "
                         f"{len(tokens)}")
    signed = bool((values < 0).any())
    limit = float(max(np.abs(values).max(), 1e-12))
    names = [escape(name) for name in row_names]
    custom = None
    if rows * n <= HOVER_CELLS:
        custom = np.broadcast_to(np.array([escape(t) for t in tokens], dtype=object), (rows, n))
    fig = go.Figure(go.Heatmap(
        z=values, x=list(range(n)), y=names, customdata=custom, colorscale="RdBu" if signed else WEIGHT_SCALE,
        zmid=0.0 if signed else None, zmin=-limit if signed else 0.0, zmax=limit, xgap=0,
        colorbar=dict(title=dict(text="score" if signed else "weight")),
        hovertemplate=("%{y}<br>position %{x}" + (" · %{customdata}" if custom is not None else "")
                       + "<br>%{z:.5f}<extra></extra>")))
    if boundary is not None and 0 < boundary < n:
        fig.add_vline(x=boundary - 0.5, line=dict(color="#d62728", width=2, dash="dot"))
    fig.update_layout(title=dict(text=escape(title)), height=160 + 40 * rows, margin=dict(l=10, r=10, t=60, b=10),
                      xaxis=dict(title=dict(text=f"position (of {n}; hover for the token)"), range=[-0.5, n - 0.5],
                                 showgrid=False, zeroline=False),
                      yaxis=dict(autorange="reversed", automargin=True))
    return fig


def top_positions(row: np.ndarray, tokens: Sequence[str], k: int = TOP_TOKENS, column: str = "weight"
                  ) -> pd.DataFrame:
    """The `k` positions of `row` largest in magnitude, largest first: position, token and value (`column`)."""
    row = np.asarray(row, dtype=np.float64)
    if row.ndim != 1 or len(row) != len(tokens):
        raise ValueError(f"a row of {len(tokens)} values is needed, got shape {row.shape}")
    order = np.argsort(-np.abs(row), kind="stable")[:k]
    return pd.DataFrame({"position": order, "token": [tokens[i] for i in order], column: row[order]})
