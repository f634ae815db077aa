"""The figure of an ablation's effect on a language model's prompt: per position, the log-probability of the actual
next token with every head on and with the chosen heads off, and the KL between the two next-token distributions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .analysis_figures import MARGIN
from .figure_style import escape
from .map_figures import MAX_TICK_LABELS

INTACT_COLOR, ABLATED_COLOR, KL_COLOR = "#4c78a8", "#e4572e", "#54a24b"


def logit_change_figure(table: pd.DataFrame, title: str) -> go.Figure:
    """`table` (from `lm_head_roles.logit_change`) as two panels over the positions: the next token's log-probability
    intact and ablated (lines), and the KL (bars); the x axis names each position's token (past `MAX_TICK_LABELS`
    positions, its position alone: the tokens on hover)."""
    positions = table["position"].to_numpy()
    labels = [f"{p + 1}: {escape(t)}→{escape(n)}" for p, t, n in
              zip(positions, table["token"], table["next_token"])]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
                        subplot_titles=["log P(next token)", "KL(every head on ‖ heads off), nats"])
    for column, name, color in (("log_prob_intact", "every head on", INTACT_COLOR),
                                ("log_prob_ablated", "heads off", ABLATED_COLOR)):
        values = table[column].to_numpy(dtype=float)
        fig.add_trace(go.Scatter(x=positions, y=np.where(np.isnan(values), None, values), name=name,
                                 mode="lines+markers", line=dict(color=color), customdata=labels,
                                 hovertemplate="%{customdata}<br>%{y:.3f}<extra>" + name + "</extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=positions, y=table["kl"], name="KL", marker_color=KL_COLOR, customdata=labels,
                         hovertemplate="%{customdata}<br>KL %{y:.4f}<extra></extra>"), row=2, col=1)
    if len(positions) > MAX_TICK_LABELS:  # a long prompt: positions on the axis (a label each would stall a browser)
        fig.update_xaxes(title_text="position (hover for its token)", row=2, col=1)
    else:
        fig.update_xaxes(tickmode="array", tickvals=positions, ticktext=[escape(t) for t in table["token"]],
                         title_text="position (its token)", row=2, col=1)
    fig.update_layout(title=dict(text=escape(title)), margin=MARGIN, height=480,
                      legend=dict(orientation="h", y=1.12, x=1, xanchor="right"))
    return fig
