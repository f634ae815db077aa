"""Figures of traces and models as Plotly figures, usable anywhere: Jupyter, scripts, the Streamlit app.

    import viz_model
    from viz_model.plot import heatmap, model_view
    model = viz_model.load()
    trace = model.trace("Two dogs play in the snow.")
    heatmap(trace, "cross", layer=2)          # one layer, heads averaged (layers and heads count from 0)
    model_view(trace, "encoder")              # every layer x head

The builders live in `map_figures` (maps of a trace), `pe_lab_figures` (positional encodings), `decoding_figures`
(beam tree), `training_figures`, `analysis_figures` (per-head grids over a corpus) and the other ``*_figures``
modules; this module names the ones a notebook needs most.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go

from ..analysis.ablation import layer_counts
from ..kinds.translator import TranslationModel
from ..search.hypotheses import BeamTree
from ..trace import AttentionTrace
from .analysis_figures import role_grid
from .decoding_figures import beam_tree_figure
from .map_figures import Head, head_heatmap, head_view, model_view, token_focus
from .positional_trace_figures import positional_heatmap, sinusoid_figure

__all__ = ["beam_tree", "head_roles", "head_view", "heatmap", "model_view", "positional_encodings", "sinusoids",
           "token_focus"]


def heatmap(trace: AttentionTrace, kind: str, layer: int, head: Head = "mean", level: str = "piece") -> go.Figure:
    """One attention map of a trace: `kind` "encoder", "decoder" or "cross"; `head` an index, "mean" or "max";
    `level` "piece" or "word"."""
    return head_heatmap(trace, kind, layer, head, level)


def positional_encodings(trace: AttentionTrace) -> go.Figure:
    """The positional encodings the model added to the trace's source tokens, one row per token."""
    return positional_heatmap(trace.source_positional, trace.source_tokens,
                              "Positional encodings of the source tokens",
                              layout=trace.config.get("sinusoid_layout", "interleaved"))


def sinusoids(trace: AttentionTrace, dims: tuple[int, ...] = (0, 1, 4, 5)) -> go.Figure:
    """Chosen dimensions of the source side's positional encodings as curves over the positions."""
    layout = trace.config.get("sinusoid_layout", "interleaved")
    return sinusoid_figure(trace.source_positional, dims, layout=layout)


def beam_tree(tree: BeamTree, model: TranslationModel | Callable[[int], str]) -> go.Figure:
    """Every hypothesis of a recorded beam search (`TranslationModel.beam_tree`), the chosen path in red; `model`
    (or a function from id to piece) names the pieces."""
    piece = model if callable(model) else model.tokenizer.piece
    return beam_tree_figure(tree, piece)


def head_roles(table: pd.DataFrame, model: TranslationModel, title: str = "The role of every head") -> go.Figure:
    """The role of every head (a table from `viz_model.analysis` / `viz-model analyze`), one grid per kind."""
    return role_grid(table, layer_counts(model.config), model.config.heads, title)
