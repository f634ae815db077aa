"""Look inside one attention layer for a padded batch: Q K^T, the scaling, the masks and the softmax, step by step.

`layer_scores` runs the model once on the batch and reads the layer's `AttentionRecord`: every intermediate of
``softmax(mask(Q K^T / sqrt(d_k)))`` as the forward computed it, so a view can show why a weight is what it is,
and why padded or future positions get exactly 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..config.checks import check_int
from ..data.batching import pad
from ..nn.arrays import to_numpy
from ..nn.attention import AttentionRecord, causal_mask
from ..nn.kinds import check_kind
from ..nn.model import Transformer


@dataclass
class LayerScores:
    """Scores of one layer for a batch; arrays are ``(batch, heads, query_len, key_len)`` unless noted."""

    kind: str
    layer: int
    query_ids: np.ndarray  # (batch, query_len), padded with pad_id
    key_ids: np.ndarray  # (batch, key_len)
    raw: np.ndarray  # Q K^T
    scaled: np.ndarray  # Q K^T / sqrt(d_k) (not divided where the model does not scale: T5), plus an added bias
    position_bias: np.ndarray | None  # the positional part of `scaled` (ALiBi, relative, RoPE), broadcastable
    mask: np.ndarray  # (batch, query_len, key_len) bool, True = may attend (padding AND causal)
    padding_mask: np.ndarray  # (batch, key_len) bool, True = real key token
    causal_mask: np.ndarray | None  # (query_len, key_len) bool for decoder self-attention, else None
    weights: np.ndarray  # masked softmax of `scaled`
    d_k: int

    def masked(self) -> np.ndarray:
        """The scaled scores with masked cells set to -inf (what the softmax sees)."""
        return np.where(self.mask[:, None], self.scaled, -np.inf)


def layer_scores(network: Transformer, source_ids: Sequence[Sequence[int]], kind: str, layer: int,
                 target_ids: Sequence[Sequence[int]] | None = None) -> LayerScores:
    """Every step of one attention layer's weights for a batch of sentences (padded to the longest).

    `source_ids`: encoder inputs (pieces + ``</s>``); `target_ids`: decoder inputs (``<s> y1 ..``), needed for
    the "decoder" and "cross" kinds. `layer` counts from 0.
    """
    check_kind(kind)
    cfg = network.config
    count = cfg.encoder_layers if kind == "encoder" else cfg.decoder_layers
    check_int("layer", layer, 0, count - 1, error=ValueError,
              message=f"{kind} layer must be an integer from 0 to {count - 1}, got {layer!r}")
    if kind != "encoder" and target_ids is None:
        raise ValueError(f"the {kind} kind needs target_ids (decoder inputs)")
    if target_ids is not None and len(target_ids) != len(source_ids):
        raise ValueError(f"{len(source_ids)} source sequences but {len(target_ids)} target sequences")
    device = next(network.parameters()).device
    src = pad(source_ids, cfg.pad_id).to(device)
    tgt = pad(target_ids, cfg.pad_id).to(device) if target_ids is not None else None
    with torch.inference_mode():
        if tgt is None:
            record = network.encode(src, need_weights=True).records[layer]
        else:
            record = network(src, tgt, need_weights=True).records(kind)[layer]
    scale = network.attention_block(kind, layer)[0].scale
    return _from_record(record, kind, layer, src, tgt, cfg.pad_id, scale, network.adds_score_bias)


def _from_record(record: AttentionRecord, kind: str, layer: int, src: Tensor, tgt: Tensor | None,
                 pad_id: int, scale: bool = True, bias_added: bool = False) -> LayerScores:
    """The record's tensors as arrays, with the mask spelled out over every query and key."""
    keys = src if kind != "decoder" else tgt
    queries = src if kind == "encoder" else tgt
    assert keys is not None and queries is not None
    batch, _, query_len, key_len = record.scores.shape
    shape = (batch, 1, query_len, key_len)
    mask = torch.ones(shape, dtype=torch.bool) if record.mask is None else record.mask.expand(shape)
    d_k = record.values.shape[-1]
    # Q K^T of the (rotated, under RoPE) queries and keys: an added bias (ALiBi, relative) is taken out first
    content = record.scores - record.position_bias if bias_added and record.position_bias is not None else record.scores
    return LayerScores(
        kind=kind, layer=layer, query_ids=to_numpy(queries), key_ids=to_numpy(keys),
        raw=to_numpy(content) * (np.sqrt(d_k) if scale else 1.0), scaled=to_numpy(record.scores),
        position_bias=None if record.position_bias is None else to_numpy(record.position_bias),
        mask=to_numpy(mask[:, 0]), padding_mask=to_numpy(keys != pad_id),
        causal_mask=to_numpy(causal_mask(query_len)[0, 0]) if kind == "decoder" else None,
        weights=to_numpy(record.weights), d_k=d_k)
