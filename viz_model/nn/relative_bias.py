"""T5's relative position bias (Raffel et al. 2020): nothing is added to the input; a learned scalar per head and
relative-position bucket is added to the self-attention scores.

The bucket of the offset ``j - p`` (key minus query): half the buckets for each sign in a bidirectional stack (the
encoder), one sign only in a causal one (the decoder, where later keys are masked anyway); within a sign, the small
distances one bucket each, larger ones log-spaced buckets up to `max_distance`, beyond it the last bucket. The bias
is computed once per stack and shared by every layer, as T5 does (its first layer owns the table). Cross-attention
has no position bias.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .score_position import ScorePosition


def relative_position_bucket(relative_position: Tensor, bidirectional: bool = True, num_buckets: int = 32,
                             max_distance: int = 128) -> Tensor:
    """The bucket of each offset ``key - query`` (`transformers`' ``T5Attention._relative_position_bucket``)."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = -torch.clamp(relative_position, max=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log(0) never reaches a chosen value (those distances are small), the clamp only avoids -inf
    logarithmic = max_exact + (torch.log(distance.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
                               * (num_buckets - max_exact)).long()
    logarithmic = torch.clamp(logarithmic, max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, logarithmic)


class RelativePositionBias(nn.Module):
    """The learned ``(num_buckets, heads)`` table of one stack and the bias it adds to every layer's scores.

    :ivar embedding: one scalar per bucket and head
    """

    adds_bias = True  # a bias added to the scores, the same for any tokens

    def __init__(self, heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True) -> None:
        super().__init__()
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.embedding = nn.Embedding(num_buckets, heads)
        self._by_offset: dict[torch.device, Tensor] = {}  # bucket of each offset -max_distance..max_distance

    def buckets(self, queries: Tensor, keys: Tensor) -> Tensor:
        """The bucket of every (query, key) pair: ``(batch, q_len, k_len)``, looked up by offset (an offset beyond
        max_distance is in the last bucket of its sign, as at max_distance): a decoding step's few keys cost one
        lookup, not the dozen operations of `relative_position_bucket`."""
        offsets = (keys[:, None, :] - queries[:, :, None]).clamp(-self.max_distance, self.max_distance)
        return self._offset_table(offsets.device)[offsets + self.max_distance]

    def _offset_table(self, device: torch.device) -> Tensor:
        """`relative_position_bucket` of every offset from -max_distance to max_distance, built once per device."""
        table = self._by_offset.get(device)
        if table is None:
            offsets = torch.arange(-self.max_distance, self.max_distance + 1, device=device)
            table = self._by_offset[device] = relative_position_bucket(offsets, self.bidirectional, self.num_buckets,
                                                                       self.max_distance)
        return table

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        """The bias ``(batch, heads, q_len, k_len)`` for query and key positions ``(batch, len)``."""
        return self.embedding(self.buckets(queries, keys)).permute(0, 3, 1, 2)

    def score_position(self, queries: Tensor, keys: Tensor, need_weights: bool) -> ScorePosition:
        """The bias between the new tokens at `queries` and every key at `keys`."""
        return ScorePosition(queries, bias=self(queries, keys), key_positions=keys)
