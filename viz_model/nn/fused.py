"""The layers of a search copy that call one kernel where the network calls two or three: decoder self-attention's
Q, K and V as one matrix ``[W_Q; W_K; W_V]``, a gated feed-forward's two input matrices as one ``[W_1; W_3]``.

A decoding step multiplies a handful of rows by every matrix of the decoder, so on a CPU it waits on per-call
overhead and on reading weights, not on arithmetic. Each output column of a matrix product is its own dot product,
so the fused products are the separate ones side by side (bit-identical with oneDNN's kernels, tested).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .attention import KVCache, MultiHeadAttention
from .causal_lm import CausalLayer
from .model import DecoderLayer, EncoderLayer, FeedForward, Transformer

Parts = tuple[tuple[Tensor, Tensor | None], ...]
"""The (weight ``(out, in)``, bias or None) of the network's linear layers that one layer of a copy computes side by
side (one pair, or a fused layer's two or three)."""
LinearFactory = Callable[[Parts], nn.Module]
"""Builds a copy's linear layer from `Parts`: int8, packed fp32, ..."""


def parts(*layers: nn.Linear) -> Parts:
    """The weights and biases of `layers` (the network's own tensors, not copies)."""
    return tuple((layer.weight, layer.bias) for layer in layers)


def stacked(layers: Parts) -> tuple[Tensor, Tensor | None]:
    """The weight and bias computing `layers` side by side: their weights stacked by output row, their biases."""
    if len(layers) == 1:
        return layers[0]
    biases = [bias for _, bias in layers]
    return torch.cat([weight for weight, _ in layers]), None if biases[0] is None else torch.cat(biases)


class FusedSelfAttention(MultiHeadAttention):
    """Self-attention whose Q, K and V projections are one layer (built by `make_linear`), as is its output."""

    def __init__(self, attn: MultiHeadAttention, make_linear: LinearFactory) -> None:
        nn.Module.__init__(self)
        self.d_model, self.heads, self.d_head, self.dropout = attn.d_model, attn.heads, attn.d_head, attn.dropout
        self.inner, self.scale, self.kv_heads = attn.inner, attn.scale, attn.kv_heads
        self.q_norm, self.k_norm, self.softcap = attn.q_norm, attn.k_norm, attn.softcap
        self.joint_qk_norm, self.sinks = attn.joint_qk_norm, attn.sinks
        self.w_qkv = make_linear(parts(attn.w_q, attn.w_k, attn.w_v))
        self.w_o = make_linear(parts(attn.w_o))
        self.train(attn.training)  # as the layer it copies (nn.Module starts training: attention dropout on)

    def project(self, query: Tensor, source: Tensor | None = None) -> tuple[Tensor, KVCache]:
        if source is not None:
            raise ValueError(f"{type(self).__name__} attends from a sequence to itself: source must be None")
        kv_inner = self.kv_heads * self.d_head
        q, k, v = self.w_qkv(query).split([self.inner, kv_inner, kv_inner], dim=-1)
        return self.split_heads(q), KVCache(self.split_heads(k), self.split_heads(v))


class FusedGatedFeedForward(nn.Module):
    """A gated feed-forward network ``(act(x W1) * x W3) W2`` whose W1 and W3 are one layer (built by
    `make_linear`)."""

    def __init__(self, ffn: FeedForward, make_linear: LinearFactory) -> None:
        super().__init__()
        if ffn.w_3 is None:
            raise ValueError("FusedGatedFeedForward fuses a gated feed-forward network's W1 and W3: this one has no W3")
        self.d_ff, self.activation = ffn.w_1.out_features, ffn.activation
        self.w_13 = make_linear(parts(ffn.w_1, ffn.w_3))
        self.w_2 = make_linear(parts(ffn.w_2))
        self.train(ffn.training)

    def forward(self, x: Tensor) -> Tensor:
        activated, gate = self.w_13(x).split(self.d_ff, dim=-1)
        return self.w_2(self.activation(activated) * gate)


def with_search_layers(module: nn.Module, make_linear: LinearFactory) -> nn.Module:
    """A shallow copy of `module` whose Linear layers (at any depth) are built by `make_linear`, a layer's
    self-attention and gated feed-forward fused; every other tensor (norms, embeddings) is shared."""
    if isinstance(module, nn.Linear):
        return make_linear(parts(module)).train(module.training)
    fused: dict[str, nn.Module] = {}
    if isinstance(module, EncoderLayer | DecoderLayer | CausalLayer):
        fused["self_attn"] = FusedSelfAttention(module.self_attn, make_linear)
        if getattr(module.ffn, "w_3", None) is not None:  # an attention-only layer has none, experts their own
            fused["ffn"] = FusedGatedFeedForward(module.ffn, make_linear)
    clone = copy.copy(module)  # new __dict__, same parameter and buffer tensors
    clone._modules = {name: fused[name] if name in fused else None if child is None
                      else with_search_layers(child, make_linear) for name, child in module._modules.items()}
    return clone


def search_copy(network: Transformer, make_linear: LinearFactory, make_projection: Callable[[Tensor], nn.Module],
                encoder: bool = False) -> Transformer:
    """A copy of `network` for inference: its decoder layers (and with `encoder` its encoder layers) through
    `with_search_layers`, its vocabulary projection (tied or not) built by `make_projection` from that weight. Every
    other tensor is shared, as is the encoder without `encoder` (it runs once per sentence)."""
    clone = copy.copy(network)
    clone._modules = dict(network._modules)
    clone.decoder_layers = with_search_layers(network.decoder_layers, make_linear)
    if encoder:
        clone.encoder_layers = with_search_layers(network.encoder_layers, make_linear)
    clone.output_projection = make_projection(
        network.tgt_embedding.weight if network.output_projection is None else network.output_projection.weight)
    clone.output_projection.train(network.training)
    return clone
