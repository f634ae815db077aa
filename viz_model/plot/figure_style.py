"""The look every figure shares: HTML-escaped labels, head colours, the weight scale, token axes, margins.

Every label that comes from user text is HTML-escaped: Plotly renders a subset of HTML in labels and hovers,
so ``<script>`` must arrive as the text ``&lt;script&gt;``.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

WEIGHT_SCALE = "Blues"
HEAD_COLORS = qualitative.Plotly + qualitative.D3 + qualitative.Dark24
# a horizontal legend above the plot area, right-aligned under the title: it never covers bars, cells or lines
# (a figure using it leaves ~100 px of top margin for the title and the legend)
LEGEND_ABOVE = dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1.0)
MARGIN = dict(l=10, r=10, t=60, b=10)


# --- labels ------------------------------------------------------------------------------------------------------
def escape(text: object) -> str:
    """Text safe for Plotly labels and hovers: ``<``, ``>`` and ``&`` become entities, shown as themselves."""
    return html.escape(str(text), quote=False)


def _row_px(n: int) -> int:
    return 24 if n <= 20 else 18 if n <= 50 else 13 if n <= 100 else 11


def _font_px(n: int) -> int:
    return 12 if n <= 50 else 10 if n <= 100 else 8


def _tick_angle(labels: Sequence[str], panels: int = 1) -> int:
    """Slant token labels when they would overlap: about 7 px a character against ~900 px shared by `panels`."""
    return -45 if sum(len(t) + 1 for t in labels) * 7 > 900 / panels else 0


def _token_axis(labels: Sequence[str], title: str, reverse: bool = False) -> dict:
    n = len(labels)
    axis = dict(title=dict(text=title), automargin=True, tickmode="array", tickvals=list(range(n)),
                ticktext=[escape(t) for t in labels], tickfont=dict(size=_font_px(n)), showgrid=False,
                zeroline=False, range=[n - 0.5, -0.5] if reverse else [-0.5, n - 0.5])
    return axis


def _marks(fig: go.Figure, marks: dict[str, float] | None, axis: str = "x", log: bool = False) -> None:
    """Dashed lines at named positions (e.g. the training length, max_positions); `log`: the axis is logarithmic,
    where plotly places an annotation at 10^y, so its label goes at log10(value)."""
    for n, (label, value) in enumerate((marks or {}).items()):
        color = HEAD_COLORS[(n + 3) % len(HEAD_COLORS)]
        line = dict(color=color, dash="dash", width=1.5)
        if axis == "x":
            fig.add_vline(x=value, line=line, annotation_text=escape(label),
                          annotation_position="top right" if n % 2 == 0 else "bottom right")
        elif log:
            fig.add_hline(y=value, line=line)
            fig.add_annotation(x=0, xref="x domain", y=float(np.log10(value)), yref="y", text=escape(label),
                               showarrow=False, xanchor="left", yanchor="bottom" if n % 2 == 0 else "top",
                               font=dict(color=color))
        else:
            fig.add_hline(y=value, line=line, annotation_text=escape(label),
                          annotation_position="top left" if n % 2 == 0 else "bottom left")
