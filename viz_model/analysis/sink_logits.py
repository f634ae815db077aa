"""The share of attention a learned sink takes (gpt-oss): a head's softmax also runs over its sink logit and drops its
share, so each row of its map sums to one minus that share; per layer and head, its mean over the query rows."""

from __future__ import annotations

import numpy as np

from ..trace import AttentionTrace
from .map_summary import row_blocks


def learned_sink_shares(trace: AttentionTrace) -> np.ndarray | None:
    """``(layers, heads)`` float64: each head's mean, over every query row of the trace, of one minus the row's sum
    (the attention its learned sink took); None for a model without learned sinks (`AttentionTrace.sink_logits`)."""
    if trace.sink_logits() is None:
        return None
    heads, n, _ = trace.map_shape("decoder", 0)
    shares = np.zeros((len(trace.decoder_attentions), heads), dtype=np.float64)
    for layer in range(shares.shape[0]):
        for head in range(heads):
            missing = sum(float((1.0 - block.sum(axis=1, dtype=np.float64)).sum())
                          for _, block in row_blocks(trace, "decoder", layer, head))
            shares[layer, head] = missing / n
    return shares
