"""The logit lens's figures: the grid of each row's top token over the positions (its probability as the colour, on
a fixed 0..1 scale) and one token's probability and rank through the rows."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..nn.lens_reading import LogitLens
from .analysis_figures import SELECTED_COLOR
from .figure_style import LEGEND_ABOVE, MARGIN, WEIGHT_SCALE, escape
from .map_figures import MAX_TICK_LABELS

PROBABILITY_COLOR, RANK_COLOR = "#4c78a8", "#e4572e"
MAX_CELL_TEXTS = 2_000  # cells past this many name their token on hover alone


def lens_grid_figure(lens: LogitLens, title: str, chosen: tuple[int, int] | None = None, first: int = 0
                     ) -> go.Figure:
    """Rows (the embeddings at the bottom, then each block) x positions (the first numbered `first`: a window of a
    longer text): each cell names its top token, coloured by its probability (0..1); an invisible marker a cell
    carries ``customdata = [row, position]`` (a click selects it) and the hover with the cell's top candidates;
    `chosen` (row, position) is ringed."""
    rows, count, _ = lens.top_ids.shape
    positions = range(first, first + count)
    text = [[escape(cell[0]) for cell in row] for row in lens.top_tokens]
    fig = go.Figure(go.Heatmap(z=lens.top_probs[:, :, 0], x=list(positions), y=list(range(rows)), zmin=0.0,
                               zmax=1.0, colorscale=WEIGHT_SCALE, text=text, hoverinfo="skip", xgap=1, ygap=1,
                               texttemplate="%{text}" if rows * count <= MAX_CELL_TEXTS else None,
                               colorbar=dict(title="P(top)")))
    cells = [(r, p) for r in range(rows) for p in positions]
    hover = [f"{escape(lens.row_label(r))} · position {p} reads {escape(lens.tokens[p - first])}<br>" + "<br>".join(
        f"{escape(t)} {q:.3f}" for t, q in zip(lens.top_tokens[r][p - first], lens.top_probs[r, p - first]))
        for r, p in cells]
    fig.add_trace(go.Scatter(x=[p for _, p in cells], y=[r for r, _ in cells], mode="markers", hovertext=hover,
                             customdata=[[r, p] for r, p in cells], hovertemplate="%{hovertext}<extra></extra>",
                             marker=dict(size=18, color="rgba(0,0,0,0)"), showlegend=False, name="cells"))
    if chosen is not None:
        fig.add_trace(go.Scatter(x=[chosen[1]], y=[chosen[0]], mode="markers", hoverinfo="skip", showlegend=False,
                                 marker=dict(size=22, symbol="square-open", color=SELECTED_COLOR,
                                             line=dict(width=3, color=SELECTED_COLOR)), name="chosen"))
    ticks = dict(tickmode="array", tickvals=list(positions), ticktext=[escape(t) for t in lens.tokens]) \
        if count <= MAX_TICK_LABELS else {}
    fig.update_xaxes(title_text="position (the token it reads)", showgrid=False, zeroline=False, **ticks)
    fig.update_yaxes(title_text="residual stream", tickmode="array", tickvals=list(range(rows)), showgrid=False,
                     zeroline=False, ticktext=[lens.row_label(r) for r in range(rows)])
    fig.update_layout(title=dict(text=escape(title)), margin=MARGIN, height=max(300, 80 + 34 * rows))
    return fig


def token_curve_figure(probabilities: np.ndarray, ranks: np.ndarray, labels: list[str], title: str) -> go.Figure:
    """One token's probability (left axis) and rank (right axis, log, 1 at the top) through the rows named by
    `labels`."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=labels, y=probabilities, name="probability", mode="lines+markers",
                             line=dict(color=PROBABILITY_COLOR), hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=labels, y=ranks, name="rank", mode="lines+markers",
                             line=dict(color=RANK_COLOR, dash="dot"), hovertemplate="%{x}: rank %{y}<extra></extra>"),
                  secondary_y=True)
    fig.update_yaxes(title_text="probability", range=[0, 1], secondary_y=False)
    fig.update_yaxes(title_text="rank (1: the top token)", type="log", autorange="reversed", secondary_y=True)
    fig.update_layout(title=dict(text=escape(title)), margin=dict(MARGIN, t=100), height=360, legend=LEGEND_ABOVE)
    return fig
