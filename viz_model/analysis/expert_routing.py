"""Where a mixture of experts sent each token (Mixtral, gpt-oss) and how a head's attention relates to it: the router
weights as a tokens x experts matrix, and a head's attention between tokens routed alike and tokens routed apart."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..trace import AttentionTrace
from .map_summary import row_blocks


@dataclass(frozen=True)
class RoutingSplit:
    """A head's attention on the (query, earlier key) pairs of one kind.

    :ivar name: which pairs ("same first expert", ...)
    :ivar pairs: how many visible pairs (query after key) are of this kind
    :ivar mean_weight: the head's mean weight on them (NaN: none)
    :ivar share: their part of the head's weight on every earlier key
    """

    name: str
    pairs: int
    mean_weight: float
    share: float


def routed(trace: AttentionTrace) -> tuple[np.ndarray, np.ndarray]:
    """The trace's routing (`AttentionTrace.expert_routing`): experts and weights ``(layers, tokens, top_k)``; one
    line where the model has no mixture of experts."""
    routing = trace.expert_routing()
    if routing is None:
        raise ValueError("this trace has no experts' routing: the model is not a mixture of experts")
    return routing


def routing_matrix(trace: AttentionTrace, layer: int) -> np.ndarray:
    """``(tokens, experts)`` float32: each token's router weight on each expert of `layer` (0 where not chosen)."""
    experts, weights = routed(trace)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(experts):
        raise ValueError(f"layer must be an integer from 0 to {len(experts) - 1}, got {layer!r}")
    count = int(trace.config.get("experts") or experts.max() + 1)
    matrix = np.zeros((experts.shape[1], count), dtype=np.float32)
    np.put_along_axis(matrix, experts[layer], weights[layer], axis=1)
    return matrix


KINDS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "same first expert": lambda q, k: q[:, None, 0] == k[None, :, 0],
    "different first expert": lambda q, k: q[:, None, 0] != k[None, :, 0],
    "an expert in common": lambda q, k: (q[:, None, :, None] == k[None, :, None, :]).any(axis=(2, 3)),
    "no expert in common": lambda q, k: ~(q[:, None, :, None] == k[None, :, None, :]).any(axis=(2, 3)),
}
"""The pairs a split counts, from the queries' and the keys' chosen experts ``(rows, top_k)``, ``(keys, top_k)``."""


def attention_by_routing(trace: AttentionTrace, layer: int, head: int) -> list[RoutingSplit]:
    """One head's attention in `layer` split by how its layer's mixture routed query and key (`KINDS`): over the
    pairs of a query and an earlier key it sees (its own key left out: always routed alike)."""
    experts = routed(trace)[0][layer]
    n = experts.shape[0]
    visible = trace.mask("decoder", layer) & ~np.eye(n, dtype=bool)
    totals = {name: [0, 0.0] for name in KINDS}
    everything = 0.0
    for start, block in row_blocks(trace, "decoder", layer, head):
        rows = slice(start, start + len(block))
        seen = visible[rows]
        everything += float(block[seen].sum(dtype=np.float64))
        for name, pairs in KINDS.items():
            chosen = seen & pairs(experts[rows], experts)
            totals[name][0] += int(chosen.sum())
            totals[name][1] += float(block[chosen].sum(dtype=np.float64))
    return [RoutingSplit(name, count, total / count if count else float("nan"),
                         total / everything if everything > 0 else float("nan"))
            for name, (count, total) in totals.items()]
