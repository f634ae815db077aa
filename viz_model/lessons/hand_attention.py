"""Attention by hand: the notes' worked example, ``softmax(Q Kᵀ [/ √d_k]) V`` and multi-head attention step by
step through the library's own `viz_model.nn.attention`, and softmax saturation against d_k.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..nn.attention import MultiHeadAttention, attention, attention_scores, causal_mask, masked_softmax
from .lesson_inputs import InputError, whole_number

# --- attention by hand -------------------------------------------------------------------------------------------
EXAMPLE_X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=np.float64)
EXAMPLE_WQ = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float64)
EXAMPLE_WK = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float64)
EXAMPLE_WV = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=np.float64)
# The numbers the source notes print for this example (shared/docs/paper-notes.md): no 1/sqrt(d_k) scaling.
NOTES = {
    "queries": [[1, 0, 2], [2, 2, 2], [2, 1, 3]],
    "keys": [[0, 1, 1], [4, 4, 0], [2, 3, 1]],
    "values": [[1, 2, 3], [2, 8, 0], [2, 6, 3]],
    "scores_q1": [2, 4, 4],
    "softmax_q1": [0.0634, 0.4683, 0.4683],  # "about"
    "softmax_q1_rounded": [0.0, 0.5, 0.5],
    "output1_rounded": [2.0, 7.0, 1.5],
    "output1_exact": [1.94, 6.68, 1.60],
}


def is_example(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> bool:
    """True when the inputs are the notes' worked example, unchanged."""
    return all(a.shape == b.shape and np.array_equal(a, b)
               for a, b in ((x, EXAMPLE_X), (wq, EXAMPLE_WQ), (wk, EXAMPLE_WK), (wv, EXAMPLE_WV)))


def check_shapes(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> None:
    """The products X W_q, X W_k, X W_v and Q K^T must exist; `InputError` says which one does not."""
    d_in = x.shape[1]
    for name, w in (("W_q", wq), ("W_k", wk), ("W_v", wv)):
        if w.shape[0] != d_in:
            raise InputError(f"{name} has {w.shape[0]} rows but X has {d_in} columns: X {name} needs them equal "
                             f"(add or delete rows of {name}, or change the width of X)")
    if wq.shape[1] != wk.shape[1]:
        raise InputError(f"W_q gives queries of width {wq.shape[1]} but W_k keys of width {wk.shape[1]}: "
                         "Q Kᵀ needs d_k equal")


@dataclass
class HandAttention:
    """Every intermediate of ``softmax(Q Kᵀ [/ √d_k]) V`` for a small example (float64 tables)."""

    q: np.ndarray  # (n, d_k)
    k: np.ndarray
    v: np.ndarray  # (n, d_v)
    scores: np.ndarray  # (n, n), scaled when `scaled`
    weights: np.ndarray  # (n, n)
    weighted: np.ndarray  # (n, n, d_v): weights[i, j] * v[j]
    output: np.ndarray  # (n, d_v)
    mask: np.ndarray | None  # (n, n) bool, True = may attend
    scaled: bool
    d_k: int


def attention_by_hand(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray, scale: bool = False,
                      causal: bool = False) -> HandAttention:
    """The example through the library: `attention_scores`, `causal_mask`, and `attention` (its math path)."""
    check_shapes(x, wq, wk, wv)
    xt = torch.tensor(x, dtype=torch.float64)
    q, k, v = (xt @ torch.tensor(w, dtype=torch.float64) for w in (wq, wk, wv))
    q4, k4, v4 = q[None, None], k[None, None], v[None, None]  # (batch 1, head 1, n, d)
    mask = causal_mask(x.shape[0]) if causal else None
    scores = attention_scores(q4, k4, scale=scale)
    out, weights = attention(q4, k4, v4, mask, need_weights=True, scale=scale, impl="math")
    w = weights[0, 0].numpy()
    return HandAttention(q=q.numpy(), k=k.numpy(), v=v.numpy(), scores=scores[0, 0].numpy(), weights=w,
                         weighted=w[:, :, None] * v.numpy()[None, :, :], output=out[0, 0].numpy(),
                         mask=None if mask is None else mask[0, 0].numpy(), scaled=scale, d_k=q.shape[1])


def round_like_notes(weights: np.ndarray) -> np.ndarray:
    """The notes' rounding of a softmax row: to the nearest 0.5 (so [0.06, 0.47, 0.47] reads [0, 0.5, 0.5])."""
    return np.round(np.asarray(weights) * 2) / 2


@dataclass
class MultiHeadSteps:
    """Multi-head attention opened up: per-head projections, weights and outputs, the concatenation, W_O."""

    heads: int
    d_head: int
    q: np.ndarray  # (heads, n, d_head)
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray  # (heads, n, n)
    head_outputs: np.ndarray  # (heads, n, d_head)
    concat: np.ndarray  # (n, d_model)
    output: np.ndarray  # (n, d_model): concat W_O
    module_output: np.ndarray  # MultiHeadAttention.forward on the same input
    w_q: np.ndarray  # (d_model, d_model), as x @ w_q
    w_o: np.ndarray

    @property
    def difference(self) -> float:
        return float(np.abs(self.output - self.module_output).max())


def multi_head_by_hand(x: np.ndarray, heads: int, seed: int = 0, causal: bool = False) -> MultiHeadSteps:
    """Split, attend, concatenate, project, with the library's `MultiHeadAttention` (random weights from `seed`,
    zero biases), and its own forward pass as the check."""
    d_model = x.shape[1]
    heads = whole_number("the number of heads", heads, 1, d_model)
    if d_model % heads:
        raise InputError(f"d_model = {d_model} (the width of X) is not divisible by {heads} heads; "
                         f"pick one of {', '.join(str(h) for h in range(1, d_model + 1) if d_model % h == 0)}")
    seed = whole_number("the seed", seed, 0, 2**31 - 1)
    module = MultiHeadAttention(d_model, heads).double().eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for linear in (module.w_q, module.w_k, module.w_v, module.w_o):
            linear.weight.copy_(torch.randn(linear.weight.shape, generator=generator, dtype=torch.float64)
                                / math.sqrt(d_model))
            linear.bias.zero_()
        xt = torch.tensor(x, dtype=torch.float64)[None]
        mask = causal_mask(x.shape[0]) if causal else None
        q = module.split_heads(module.w_q(xt))
        k = module.split_heads(module.w_k(xt))
        v = module.split_heads(module.w_v(xt))
        head_out, weights = attention(q, k, v, mask, need_weights=True, impl="math")
        concat = module.merge_heads(head_out)
        output = module.w_o(concat)
        reference, _, _ = module(xt, None, mask, need_weights=True)
    return MultiHeadSteps(heads, module.d_head, q[0].numpy(), k[0].numpy(), v[0].numpy(), weights[0].numpy(),
                          head_out[0].numpy(), concat[0].numpy(), output[0].numpy(), reference[0].numpy(),
                          module.w_q.weight.detach().T.numpy().copy(), module.w_o.weight.detach().T.numpy().copy())


def saturation(dims: Sequence[int], keys: int = 10, samples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Softmax entropy and max weight of random unit-variance queries/keys, per d_k, with and without 1/√d_k.

    Scores and softmax are the library's (`attention_scores`, `masked_softmax`). One row per (d_k, scaled).
    """
    keys = whole_number("the number of keys", keys, 2, 512)
    samples = whole_number("the number of samples", samples, 10, 20_000)
    seed = whole_number("the seed", seed, 0, 2**31 - 1)
    if not dims:
        raise InputError("pick at least one d_k")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for d in dims:
        d = whole_number("d_k", d, 1, 4096)
        q = torch.randn(samples, 1, 1, d, generator=generator)
        k = torch.randn(samples, 1, keys, d, generator=generator)
        for scale in (False, True):
            scores = attention_scores(q, k, scale=scale)
            w = masked_softmax(scores, None)[:, 0, 0]
            entropy = -(w * torch.log(w.clamp_min(1e-30))).sum(-1)
            rows.append({"d_k": d, "scaled": scale, "entropy": float(entropy.mean()),
                         "max_weight": float(w.max(-1).values.mean()), "score_std": float(scores.std())})
    return pd.DataFrame(rows)
