"""One head of an encoder-only model worked through by hand on a text: the layer's input as its attention reads it,
the head's query, key and value (rotated where the model uses RoPE), DeBERTa's position terms, the scaled scores,
the window of a local layer, the softmax and the mix of values; built from the layer's own weights, called as the
model calls them, and checked against the map the network records."""

from __future__ import annotations

import math

import numpy as np
import torch

from viz_model.kinds.encoder import EncoderModel
from viz_model.nn.disentangled import DisentangledPosition
from viz_model.nn.rotary import rotate

from .head_steps import HeadSteps, f64


@torch.inference_mode()
def encoder_head_steps(model: EncoderModel, ids: list[int], type_ids: list[int], layer: int, head: int) -> HeadSteps:
    """Head `head` (0-based) of `layer` worked through on `ids` (their token types `type_ids`), one pass."""
    network = model.network
    if not 0 <= layer < model.config.encoder_layers:
        raise ValueError(f"layer must be from 0 to {model.config.encoder_layers - 1}, got {layer}")
    attn = network.layer(layer).self_attn
    if not 0 <= head < attn.heads:
        raise ValueError(f"head must be from 0 to {attn.heads - 1}, got {head}")
    calls: list[tuple[tuple, dict]] = []

    def grab(_module: object, args: tuple, kwargs: dict) -> None:  # None: the call goes on with its own arguments
        calls.append((args, kwargs))

    handle = attn.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        out = model.forced_pass(ids, type_ids, need_weights=True)
    finally:
        handle.remove()
    # the calls of this layer's attention: one, or (ALBERT) one per depth that shares its weights
    depths = [d for d in range(model.config.encoder_layers) if network.layer(d).self_attn is attn]
    args, kwargs = calls[depths.index(layer)]
    x, mask, position = args[0], args[2] if len(args) > 2 else kwargs.get("mask"), kwargs.get("position")
    q, kv = attn.project(x)
    k, v = kv.key, kv.value
    q_projected, k_projected = f64(q[0, head]), f64(k[0, head])
    rotated = getattr(position, "rotation", None) is not None
    if rotated:
        q, k = rotate(q, *position.rotation), rotate(k, *position.rotation)
    bias = None
    divisor = math.sqrt(attn.d_head)
    if isinstance(position, DisentangledPosition):  # c2p + p2c, each divided by the scale already
        divisor = math.sqrt(attn.d_head * attn.factor)
        terms = attn.position_terms(q, k, position)
        bias = f64(sum(terms.values())[0, head]) if terms else None
    q64, k64 = f64(q[0, head]), f64(k[0, head])
    n = len(ids)
    dots = q64 @ k64.T
    scores = dots / divisor + (0.0 if bias is None else bias)
    visible = np.ones((n, n), dtype=bool) if mask is None else f64(mask.expand(1, 1, n, n)[0, 0]).astype(bool)
    masked = np.where(visible, scores, -np.inf)
    weights = np.exp(masked - masked.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    window = model.config.window_radius if layer in model.config.windowed_layers else None
    return HeadSteps(f64(x[0]), q_projected, k_projected, None, None, q64, k64, None, divisor, dots, None, bias,
                     scores, visible, weights, f64(out.records[layer].weights[0, head]), rotated, window,
                     values=f64(v[0, head]))
