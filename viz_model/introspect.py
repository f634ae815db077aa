"""Look inside one attention layer for a padded batch: Q K^T, the scaling, the masks and the softmax, step by step.

`layer_scores` recomputes a layer's queries and keys from its real input (the previous layers' output) with the
model's own modules and returns every intermediate of ``softmax(mask(Q K^T / sqrt(d_k)))``, so a view can show
why a weight is what it is, and why padded or future positions get exactly 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .attention import MultiHeadAttention, attention_scores, causal_mask, combine_masks, masked_softmax, padding_mask
from .model import ATTENTION_KINDS, Transformer


@dataclass
class LayerScores:
    """Scores of one layer for a batch; arrays are ``(batch, heads, query_len, key_len)`` unless noted."""

    kind: str
    layer: int
    query_ids: np.ndarray  # (batch, query_len), padded with pad_id
    key_ids: np.ndarray  # (batch, key_len)
    raw: np.ndarray  # Q K^T
    scaled: np.ndarray  # Q K^T / sqrt(d_k)
    mask: np.ndarray  # (batch, query_len, key_len) bool, True = may attend (padding AND causal)
    padding_mask: np.ndarray  # (batch, key_len) bool, True = real key token
    causal_mask: np.ndarray | None  # (query_len, key_len) bool for decoder self-attention, else None
    weights: np.ndarray  # masked softmax of `scaled`
    d_k: int

    def masked(self) -> np.ndarray:
        """The scaled scores with masked cells set to -inf (what the softmax sees)."""
        return np.where(self.mask[:, None], self.scaled, -np.inf)


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """``(batch, longest)`` int64 ids, right-padded with `pad_id`."""
    if not sequences or any(len(s) == 0 for s in sequences):
        raise ValueError("pad_batch needs at least one non-empty sequence")
    longest = max(len(s) for s in sequences)
    return torch.tensor([list(s) + [pad_id] * (longest - len(s)) for s in sequences], dtype=torch.long)


def layer_scores(network: Transformer, source_ids: Sequence[Sequence[int]], kind: str, layer: int,
                 target_ids: Sequence[Sequence[int]] | None = None) -> LayerScores:
    """Every step of one attention layer's weights for a batch of sentences (padded to the longest).

    `source_ids`: encoder inputs (pieces + ``</s>``); `target_ids`: decoder inputs (``<s> y1 ..``), needed for
    the "decoder" and "cross" kinds. `layer` counts from 0.
    """
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {', '.join(ATTENTION_KINDS)}; got {kind!r}")
    layers = network.encoder_layers if kind == "encoder" else network.decoder_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(layers):
        raise ValueError(f"{kind} layer must be an integer from 0 to {len(layers) - 1}, got {layer!r}")
    if kind != "encoder" and target_ids is None:
        raise ValueError(f"the {kind} kind needs target_ids (decoder inputs)")
    if target_ids is not None and len(target_ids) != len(source_ids):
        raise ValueError(f"{len(source_ids)} source sequences but {len(target_ids)} target sequences")
    device = next(network.parameters()).device
    pad = network.config.pad_id
    src = pad_batch(source_ids, pad).to(device)
    tgt = pad_batch(target_ids, pad).to(device) if target_ids is not None else None
    with torch.inference_mode():
        module, query_in, key_in, mask, causal = _attention_inputs(network, src, tgt, kind, layer)
        q = module.split_heads(module.w_q(query_in))
        k = module.split_heads(module.w_k(key_in))
        raw = attention_scores(q, k, scale=False)
        scaled = attention_scores(q, k, scale=True)
        full_mask = mask.expand(raw.shape[0], 1, raw.shape[2], raw.shape[3])
        weights = masked_softmax(scaled, full_mask)
    keys = src if kind != "decoder" else tgt
    queries = src if kind == "encoder" else tgt
    return LayerScores(
        kind=kind, layer=layer, query_ids=_np(queries), key_ids=_np(keys), raw=_np(raw), scaled=_np(scaled),
        mask=_np(full_mask[:, 0]), padding_mask=_np(keys != pad),
        causal_mask=None if causal is None else _np(causal[0, 0]), weights=_np(weights), d_k=module.d_head)


def _attention_inputs(net: Transformer, src: Tensor, tgt: Tensor | None, kind: str, layer: int
                      ) -> tuple[MultiHeadAttention, Tensor, Tensor, Tensor, Tensor | None]:
    """(attention module, query input, key input, mask, causal mask) of the layer, as the model's forward sees them."""
    src_mask = padding_mask(src, net.config.pad_id)
    if kind == "encoder":
        x = net.embed(src, "source")
        for block in net.encoder_layers[:layer]:
            x, _ = block(x, src_mask)
        block = net.encoder_layers[layer]
        h = block.attn_residual.norm(x) if block.attn_residual.pre else x
        return block.self_attn, h, h, src_mask, None
    assert tgt is not None
    encoded = net.encode(src)
    causal = causal_mask(tgt.shape[1], tgt.device)
    self_mask = combine_masks(causal, padding_mask(tgt, net.config.pad_id))
    y = net.embed(tgt, "target")
    for block in net.decoder_layers[:layer]:
        y = block(y, encoded.hidden, self_mask, encoded.mask)[0]
    block = net.decoder_layers[layer]
    if kind == "decoder":
        h = block.self_residual.norm(y) if block.self_residual.pre else y
        return block.self_attn, h, h, self_mask, causal
    y = block.self_residual(y, lambda h: block.self_attn(h, None, self_mask)[0])
    h = block.cross_residual.norm(y) if block.cross_residual.pre else y
    return block.cross_attn, h, encoded.hidden, encoded.mask, None


def _np(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy() if t.is_floating_point() else t.detach().cpu().numpy()
