"""What Complete & explore draws its own way for a language model: decoder self-attention only, heads labelled by
their key/value head, the prompt's end and each sliding window's edge marked, and their notes."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from app import completion
from app.views.explore.explore_parts import KindParts
from viz_model.plot import head_groups, window_bands
from viz_model.trace import AttentionTrace


def mark_map(fig: go.Figure, trace: AttentionTrace, layer: int) -> None:
    """The prompt's end and the layer's window edge on a piece-level map."""
    completion.mark_boundary(fig, trace)
    window_bands.mark_window(fig, window_bands.windows(trace)[layer], len(trace.target_tokens))


def heatmap_note(trace: AttentionTrace, layer: int, level: str) -> None:
    if any(w is not None for w in window_bands.windows(trace)):
        st.caption(window_bands.window_note(window_bands.windows(trace)[layer], len(trace.target_tokens))
                   + ("" if level == "piece" else " The window's edge is drawn on the token-level map."))


def mark_model_view(fig: go.Figure, trace: AttentionTrace, kind: str, aggregate: str | None) -> None:
    """Each key/value head's query heads framed (every head drawn) and the sliding layers' window edges."""
    if aggregate is None:
        head_groups.frame_groups(fig, trace, kind)
    window_bands.windowed_model_view(fig, trace, trace.num_heads if aggregate is None else 1)


def model_view_note(trace: AttentionTrace) -> str:
    return ((" Query heads framed together share one key/value head (grouped-query attention): their keys and values "
             "are the same, only their queries differ." if head_groups.kv_heads(trace) else "")
            + (" Purple steps: a sliding-window layer's edge (each query sees only its last W tokens)."
               if any(w is not None for w in window_bands.windows(trace)) else ""))


def head_view_note(trace: AttentionTrace, layer: int) -> None:
    if window_bands.windows(trace)[layer] is not None:
        st.caption(window_bands.window_note(window_bands.windows(trace)[layer], len(trace.target_tokens)))


PARTS = KindParts(
    attention_kinds=["decoder"], say_kind_change=False,  # a language model has no encoder
    head_label=completion.grouped_head_label,
    short_head_label=lambda trace: completion.grouped_head_label(trace, short=True), value_measures=False,
    mark_map=mark_map, heatmap_note=heatmap_note, mark_model_view=mark_model_view, model_view_note=model_view_note,
    groups=head_groups.kv_heads, head_view_note=head_view_note)
