"""The views of a long prompt (maps read by rows, past `on_demand.WHOLE_MAP_TOKENS` tokens): their figures made once
per trace and view (a rerun draws them again without remaking a map), let go with the trace."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import plotly.graph_objects as go

from viz_model.trace import AttentionTrace

FIGURES_PER_TRACE = 16  # figures kept for one trace, the oldest let go first

_FIGURES: dict[int, tuple[weakref.ref, dict[tuple, go.Figure]]] = {}
_LOCK = threading.Lock()


def cached_figure(trace: AttentionTrace, key: tuple, make: Callable[[], go.Figure]) -> go.Figure:
    """A copy of `make()`'s figure for `trace` and `key`, made once while the trace lives (nothing of it is kept
    once the trace is let go)."""
    with _LOCK:
        for ident in [i for i, (ref, _) in _FIGURES.items() if ref() is None]:
            del _FIGURES[ident]
        entry = _FIGURES.get(id(trace))
        figure = None if entry is None or entry[0]() is not trace else entry[1].get(key)
    if figure is None:
        figure = make()
        with _LOCK:
            entry = _FIGURES.get(id(trace))
            if entry is None or entry[0]() is not trace:
                entry = _FIGURES[id(trace)] = (weakref.ref(trace), {})
            entry[1][key] = figure
            while len(entry[1]) > FIGURES_PER_TRACE:
                entry[1].pop(next(iter(entry[1])))
    return go.Figure(figure)


def held_traces() -> int:
    """How many live traces have figures kept (for tests)."""
    with _LOCK:
        return sum(ref() is not None for ref, _ in _FIGURES.values())
