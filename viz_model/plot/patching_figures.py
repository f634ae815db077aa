"""Figures of head patching: the layer x head grid of how much of the clean answer's logit difference each head
restores, and one head's maps in the clean and the corrupted run side by side."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from .analysis_figures import head_grid
from .pe_lab_figures import attention_pair_figure


def restored_figure(restored: np.ndarray, title: str, selected: tuple[int, int] | None = None) -> go.Figure:
    """``(layers, heads)`` restored fractions on a scale centred on 0 (the corrupted run), each cell labelled; the
    `selected` head (0-based layer, head) ringed."""
    labels = np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.2f}")(restored)
    chosen = [] if selected is None else [("decoder", *selected)]
    return head_grid({"decoder": restored}, title, "restored", "RdBu", selected=chosen, labels={"decoder": labels},
                     zmid=0.0)


def head_maps_figure(clean: np.ndarray, corrupted: np.ndarray, clean_tokens: Sequence[str],
                     corrupted_tokens: Sequence[str], layer: int, head: int) -> go.Figure:
    """One head's ``(n, n)`` maps in the clean and the corrupted run, side by side (`layer`, `head` 0-based)."""
    return attention_pair_figure([("Clean run", clean, clean_tokens, clean_tokens),
                                  ("Corrupted run", corrupted, corrupted_tokens, corrupted_tokens)],
                                 f"Layer {layer + 1}, head {head + 1} in both runs")
