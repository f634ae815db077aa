"""Learned attention sinks (gpt-oss): one logit per head beside the keys. The softmax runs over the keys and the sink,
and the sink's share is dropped, so a map's rows sum to ``1 - sink share`` (transformers' eager attention returns
the same rows, the sink's column dropped)."""

from __future__ import annotations

import torch
from torch import Tensor


def sink_softmax(masked: Tensor, sinks: Tensor) -> Tensor:
    """Softmax over the keys of `masked` scores ``(.., heads, rows, keys)`` (masked keys at -inf) and each head's sink
    logit `sinks` ``(heads,)``, in float32, the sink's column dropped; back in the scores' dtype."""
    column = sinks.float().reshape(-1, 1, 1).expand(*masked.shape[:-1], 1)
    with_sink = torch.cat([masked.float(), column], dim=-1)
    return torch.softmax(with_sink, dim=-1)[..., :-1].to(masked.dtype)

