"""ALiBi (Press et al. 2022, "Train Short, Test Long"; BLOOM, MPT): no embedding; each head h subtracts a linear
penalty from its scores, ``-m_h * |p - j|``, with the slopes ``m_h`` a geometric sequence.

The slopes are BLOOM's (`transformers`' ``_get_alibi_slopes``): for H a power of two, ``m_h = 2^(-max_bias * h/H)``
(max_bias 8: 1/2, 1/4, ... for 8 heads); otherwise the closest lower power of two's, then every other slope of the
next power's. ALiBi was built for causal attention, where ``|p - j| = p - j`` for every visible key; this project's
encoder uses the same symmetric distance in both directions (a choice: the paper has no encoder).
BLOOM adds ``m_h * j`` instead of ``-m_h * (p - j)``: the two differ by ``m_h * p`` in each query's row, which the
softmax ignores.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .score_position import ScorePosition

MAX_BIAS_RANGE = (0.5, 64.0)


def alibi_slopes(heads: int, max_bias: float = 8.0) -> Tensor:
    """The ``(heads,)`` float32 slopes, BLOOM's rule (`max_bias` 8 is BLOOM's and the paper's)."""
    if heads < 1:
        raise ValueError(f"ALiBi needs at least one head, got {heads}")
    closest = 2 ** math.floor(math.log2(heads))
    cpu = torch.device("cpu")  # also where a model is built on the meta device to be loaded
    base = torch.tensor(2 ** (-max_bias / closest), dtype=torch.float32, device=cpu)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32, device=cpu))
    if closest != heads:
        extra_base = torch.tensor(2 ** (-max_bias / (2 * closest)), dtype=torch.float32, device=cpu)
        remaining = min(closest, heads - closest)
        odd = torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32, device=cpu)
        slopes = torch.cat([slopes, torch.pow(extra_base, odd)])
    return slopes


def alibi_bias(queries: Tensor, keys: Tensor, slopes: Tensor) -> Tensor:
    """``-m_h * |p - j|`` for query positions ``(batch, q_len)`` and key positions ``(batch, k_len)``:
    ``(batch, heads, q_len, k_len)``."""
    distance = (queries[:, :, None] - keys[:, None, :]).abs().float()
    return -slopes.to(queries.device)[None, :, None, None] * distance[:, None]


class ALiBi:
    """ALiBi for one stack's self-attention: no parameters, the slopes from the head count and `max_bias`."""

    adds_bias = True  # a bias added to the scores, the same for any tokens

    def __init__(self, heads: int, max_bias: float = 8.0) -> None:
        self.slopes = alibi_slopes(heads, max_bias)

    def score_position(self, queries: Tensor, keys: Tensor, need_weights: bool) -> ScorePosition:
        """The penalty between the new tokens at `queries` ``(batch, len)`` and every key at `keys`."""
        return ScorePosition(queries, bias=alibi_bias(queries, keys, self.slopes), key_positions=keys)
