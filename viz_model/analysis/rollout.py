"""Attention rollout and attention flow (Abnar & Zuidema, 2020): how much each output position of a self-attention
stack draws from each input token, through all layers.

Each layer's heads are averaged and the residual connection is modelled by mixing in the identity:
``B_l = residual * I + (1 - residual) * mean_heads(A_l)``, rows renormalised (the paper: 0.5 / 0.5).
Rollout multiplies them, ``R_l = B_l R_{l-1}`` (``R_1 = B_1``): ``R_L[i, j]`` is the share of output position i
that comes from input token j, every row a distribution. Flow reads the layers as a graph with one node per
(layer, position) and an edge from (l-1, j) to (l, i) of capacity ``B_l[i, j]``; ``flow[i, j]`` is the maximum flow
from input node j to output node i (at most 1: the output node's incoming capacities sum to 1). The maximum flows
are computed by `scipy.sparse.csgraph.maximum_flow` on integer capacities (``B * resolution``, rounded).
Inputs are a trace's ``encoder_attentions`` (or ``decoder_attentions``): per layer ``(heads, n, n)`` or ``(n, n)``.
`rollout_rows` gives a few rows of the rollout of a long trace, one layer's head mean at a time, a block of rows
at a time (its memory: a block of rows, never layers x n x n).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..config.checks import check_int
from ..nn.score_recipe import first_rows
from ..on_demand import OnDemandMaps, recipe_maps
from ..trace import AttentionTrace

DEFAULT_RESOLUTION = 10**6


def residual_attention(attentions: Sequence[np.ndarray], residual: float = 0.5) -> np.ndarray:
    """``(layers, n, n)``: each layer's head-averaged map mixed with the identity, rows summing to 1."""
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual (the identity's share) must be from 0 to 1, got {residual!r}")
    if len(attentions) == 0:
        raise ValueError("no attention layers given")
    layers = []
    for index, a in enumerate(attentions):
        a = np.asarray(a, dtype=np.float64)
        a = a.mean(axis=0) if a.ndim == 3 else a
        if a.ndim != 2 or a.shape[0] != a.shape[1] or (layers and a.shape != layers[0].shape):
            raise ValueError(f"layer {index}: expected a square self-attention map (heads, n, n) or (n, n) with the "
                             f"n of layer 0, got shape {np.shape(attentions[index])}")
        if not np.isfinite(a).all() or (a < 0).any():
            raise ValueError(f"layer {index}: attention weights must be finite and non-negative")
        mixed = residual * np.eye(a.shape[0]) + (1.0 - residual) * a
        layers.append(mixed / mixed.sum(axis=1, keepdims=True))
    return np.stack(layers)


def attention_rollout(attentions: Sequence[np.ndarray], residual: float = 0.5) -> np.ndarray:
    """``(layers, n, n)``: the rollout after each layer; the last one is the whole stack's."""
    mixed = residual_attention(attentions, residual)
    out = np.empty_like(mixed)
    out[0] = mixed[0]
    for layer in range(1, len(mixed)):
        out[layer] = mixed[layer] @ out[layer - 1]
    return out


def _scipy_sparse() -> Any:
    """scipy.sparse, imported on first use: only attention flow needs it."""
    try:
        import scipy.sparse
        import scipy.sparse.csgraph
    except ImportError:
        raise ImportError("attention_flow needs scipy (pip install scipy); attention_rollout does not") from None
    return scipy.sparse


def flow_graph(mixed: np.ndarray, resolution: int = DEFAULT_RESOLUTION) -> Any:
    """The layered graph (a scipy ``csr_array`` of integer capacities) of `residual_attention` maps: node
    ``l * n + p`` is position p after l layers (0 = the input tokens)."""
    layers, n, _ = mixed.shape
    capacity = np.rint(mixed * resolution).astype(np.int32)
    rows, cols, values = [], [], []
    for layer in range(layers):
        target, source = np.nonzero(capacity[layer])
        rows.append(layer * n + source)
        cols.append((layer + 1) * n + target)
        values.append(capacity[layer][target, source])
    size = (layers + 1) * n
    return _scipy_sparse().csr_array((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                                     shape=(size, size))


def attention_flow(attentions: Sequence[np.ndarray], residual: float = 0.5,
                   resolution: int = DEFAULT_RESOLUTION) -> np.ndarray:
    """``(n, n)``: ``flow[i, j]`` = maximum flow from input token j to output position i of the whole stack."""
    check_int("resolution", resolution, 1, 10**8, error=ValueError,
              message=f"resolution must be an integer from 1 to 10**8, got {resolution!r}")
    mixed = residual_attention(attentions, residual)
    layers, n, _ = mixed.shape
    graph = flow_graph(mixed, resolution)
    maximum_flow = _scipy_sparse().csgraph.maximum_flow
    flow = np.zeros((n, n))
    for j in range(n):
        for i in range(n):
            flow[i, j] = maximum_flow(graph, j, layers * n + i).flow_value / resolution
    return flow


BLOCK_CELLS = 2**24  # weights (heads x rows x keys) `rollout_rows` makes at a time: 64 MB of float32


def head_mean_rows(trace: AttentionTrace, kind: str, layer: int, rows: slice) -> np.ndarray:
    """``(rows, keys)`` float64: the mean over heads of one layer's query rows `rows`, every head made at once (maps
    on demand: from the layer's recipe, the mask made once)."""
    maps = trace.attentions(kind)
    if not isinstance(maps, OnDemandMaps):
        return np.asarray(maps[layer][:, rows], dtype=np.float64).mean(axis=0)
    recipe = maps.recipes[layer]
    keys = recipe.key_positions
    stop = len(keys)
    if recipe.causal and bool((keys[1:] >= keys[:-1]).all()):  # keys after the block's last query weigh 0: not made
        stop = int(torch.searchsorted(keys, recipe.query_positions[rows].max(), right=True))
        recipe = first_rows(recipe, recipe.shape[1], stop)
    mean = np.zeros((len(range(*rows.indices(recipe.shape[1]))), len(keys)))
    mean[:, :stop] = recipe_maps(recipe, None, rows).mean(dim=0).double().numpy()
    return mean


def rollout_rows(trace: AttentionTrace, kind: str, queries: Sequence[int], layers: int | None = None,
                 residual: float = 0.5) -> np.ndarray:
    """``(len(queries), n)``: rows `queries` of ``attention_rollout(trace.attentions(kind), residual)[layers - 1]``
    (all layers: None), carried as row vectors from layer `layers` down to the first; each layer's head mean is made
    a block of query rows at a time (at most `BLOCK_CELLS` weights, `head_mean_rows`) and let go (never a whole
    layer's maps)."""
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual (the identity's share) must be from 0 to 1, got {residual!r}")
    count = len(trace.attentions(kind))
    layers = count if layers is None else check_int(
        "layers", layers, 1, count, error=ValueError,
        message=f"layers must be an integer from 1 to {count} ({kind}), got {layers!r}")
    heads, n, m = trace.map_shape(kind, 0)
    if n != m:
        raise ValueError(f"rollout reads self-attention: {kind} maps are {n} x {m}")
    chosen = list(queries)
    if not chosen or any(isinstance(q, bool) or not isinstance(q, int | np.integer) or not 0 <= q < n
                         for q in chosen):
        raise ValueError(f"queries must be a non-empty list of positions from 0 to {n - 1}, got {queries!r}")
    block_rows = max(1, BLOCK_CELLS // (heads * n))
    rows = np.zeros((len(chosen), n))
    rows[np.arange(len(chosen)), chosen] = 1.0
    for layer in reversed(range(layers)):
        reached = int(np.flatnonzero(rows.any(axis=0)).max()) + 1  # later rows carry nothing (causal: none)
        carried = np.zeros_like(rows)
        for start in range(0, reached, block_rows):
            block = slice(start, min(reached, start + block_rows))
            mean = head_mean_rows(trace, kind, layer, block)
            share = rows[:, block] / (residual + (1.0 - residual) * mean.sum(axis=1))  # each mixed row renormalised
            carried += (1.0 - residual) * (share @ mean)
            carried[:, block] += residual * share
        rows = carried
    return rows
