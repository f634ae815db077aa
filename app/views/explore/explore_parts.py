"""What Explore's views draw their own way for each kind of model (`KindParts`), and the plain head labels most kinds
use; the explore scripts fill one in, `explore_views` and `explore_readings` read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import plotly.graph_objects as go

from app import state
from viz_model.trace import AttentionTrace


@dataclass(frozen=True)
class KindParts:
    """What the views draw their own way for one kind of model: the attention kinds offered (the first is the
    fallback; `say_kind_change`: a kind that does not exist here is said), the head pickers' labels, whether the
    heatmap offers value-weighted maps and contributions, the marks on a self-attention map and on the model view,
    the notes below them, the key/value head groups of the head view and the queries and keys it draws (a window
    of a long prompt's; one sentence of a pair to the other)."""

    attention_kinds: list[str]
    say_kind_change: bool
    head_label: Callable[[AttentionTrace], Callable[[int | str], str]]
    short_head_label: Callable[[AttentionTrace], Callable[[int], str]]
    value_measures: bool
    mark_map: Callable[[go.Figure, AttentionTrace, int], None]
    heatmap_note: Callable[[AttentionTrace, int, str], None]
    mark_model_view: Callable[[go.Figure, AttentionTrace, str, str | None], None]
    model_view_note: Callable[[AttentionTrace], str]
    groups: Callable[[AttentionTrace], list[int] | None]
    head_view_note: Callable[[AttentionTrace, int], None]
    head_windows: Callable[[AttentionTrace, slice | None], tuple[slice | None, slice | None]] = (
        lambda trace, window: (window, None))  # the head view's queries and keys (an encoder's pair: A and B)


def head_label(trace: AttentionTrace) -> Callable[[int | str], str]:
    """The head pickers' plain labels: "Head 2 of 8", "Mean over heads"."""
    return lambda value: state.head_label(value, trace.num_heads)


def short_head_label(trace: AttentionTrace) -> Callable[[int], str]:
    """The head view's plain labels of its 0-based heads: "Head 2"."""
    return lambda head: f"Head {head + 1}"
