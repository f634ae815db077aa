"""Scaled dot-product attention, masks and multi-head attention.

Mask convention (the only one in this project): a boolean tensor where **True means "may attend"**.
It broadcasts against attention scores of shape ``(batch, heads, query_len, key_len)``. Masked
positions get a score of -inf before the softmax, so their weight is exactly 0.

`attention` has two paths:
- instrumented (``need_weights=True``): computes ``softmax(Q K^T / sqrt(d_k))`` explicitly and
  returns the per-head weights (taken before attention dropout); `explained_attention` returns the whole
  `AttentionRecord` of that computation (scores before and after masking, weights, values);
- fast (``need_weights=False``): `torch.nn.functional.scaled_dot_product_attention`, no weights (unscaled scores,
  as T5's, through its ``scale=1.0``); told ``is_causal`` where the caller says the mask is the plain causal one
  (``causal=True``), so that the kernel skips the hidden half of the keys rather than reading a mask over all of them.
Asking the fast path for weights raises; it never returns a silent ``None``. On the CPU, bf16/fp16 tensors
(training under CPU autocast) take the explicit path: PyTorch's fused CPU kernel is slower
there in the backward pass than two bf16 matmuls and a softmax (`benchmarks/bench_train.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .head_patch import LayerPatch, swapped
from .learned_sinks import sink_softmax
from .linear import Linear
from .norms import make_norm
from .rotary import rotate
from .score_position import ScorePosition
from .score_recipe import query_recipe

IMPLEMENTATIONS = ("auto", "math", "sdpa")
"""The paths `attention` can take: "math" (explicit, with weights), "sdpa" (fused, no weights) or "auto"."""


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens may be attended: ``(batch, 1, 1, key_len)``, True = real token."""
    if ids.dim() != 2:
        raise ValueError(f"padding_mask expects ids of shape (batch, seq_len), got {tuple(ids.shape)}")
    return (ids != pad_id)[:, None, None, :]


def causal_mask(length: int, device: torch.device | str | None = None, offset: int = 0) -> Tensor:
    """Query i (at absolute position offset+i) may attend key j iff j <= offset+i: ``(1, 1, length, offset+length)``."""
    if length < 1:
        raise ValueError(f"causal_mask needs length >= 1, got {length}")
    q = torch.arange(offset, offset + length, device=device)[:, None]
    k = torch.arange(offset + length, device=device)[None, :]
    return (k <= q)[None, None]


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of masks (None = no constraint): a key is visible only if every mask allows it."""
    result: Tensor | None = None
    for mask in masks:
        if mask is None:
            continue
        result = mask if result is None else (result & mask)
    return result


def _check_qkv(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("attention expects q, k, v of shape (batch, heads, seq_len, d_head); got "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"query d_k ({q.shape[-1]}) differs from key d_k ({k.shape[-1]})")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"key_len ({k.shape[-2]}) differs from value_len ({v.shape[-2]})")
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}")
        target = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        # checked by hand: torch.broadcast_shapes imports sympy on first use (~35 MB of resident memory)
        if mask.dim() > 4 or any(m not in (1, t) for m, t in zip(reversed(mask.shape), reversed(target))):
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to scores "
                             f"(batch, heads, query_len, key_len) = {target}")


def attention_scores(q: Tensor, k: Tensor, scale: bool | float = True, softcap: float | None = None) -> Tensor:
    """Q K^T, divided by sqrt(d_k) when `scale` is True (the paper's scaled dot product), by sqrt(`scale`) where it
    is a number (Gemma's query_pre_attn_scalar); then ``softcap * tanh(scores / softcap)`` where a cap is given."""
    scores = q @ k.transpose(-2, -1)
    if scale is not False:  # in place on the product's own tensor: one (.., len, keys) tensor, not two
        scores = scores.div_(math.sqrt(q.shape[-1] if scale is True else scale))
    return scores if softcap is None else torch.tanh(scores / softcap) * softcap


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over keys with masked scores set to -inf; a fully masked row gives all zeros, not NaN."""
    return softmax_over_keys(scores if mask is None else scores.masked_fill(~mask, float("-inf")), mask)


def softmax_over_keys(masked: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax in float32, back in the scores' dtype; rows with every key masked become zeros."""
    weights = torch.softmax(masked.float(), dim=-1)
    if mask is not None:  # in place where no gradient needs the softmax's output
        weights = weights.nan_to_num(0.0) if weights.requires_grad else weights.nan_to_num_(0.0)
    return weights.to(masked.dtype)


@dataclass
class AttentionRecord:
    """What one attention call computed, per head; score tensors are ``(batch, heads, query_len, key_len)``.

    Returned by a call (never stored on a module); the model's layers hand them out as ordinary return values.

    :ivar weights: softmax of the masked scores (before attention dropout)
    :ivar scores: ``Q K^T / sqrt(d_k)`` (or unscaled ``Q K^T`` when ``scale=False``), before masking
    :ivar masked_scores: the scores the softmax saw: masked keys at -inf
    :ivar values: ``(batch, heads, key_len, d_head)`` the value vectors the weights mix
    :ivar mask: the mask applied (True = may attend), broadcastable to the scores; None = all visible
    :ivar residual: set by the model's layer: ``(batch, query_len, d_model)`` the residual stream entering the
        sub-layer (what token-to-token contribution methods such as ALTI decompose)
    :ivar output: set by the model's layer: the residual stream leaving the sub-layer (after Add & Norm)
    :ivar position_bias: the positional part of `scores`, broadcastable to them: the bias added to them (ALiBi,
        T5's relative bias), or the scores minus those of the unrotated queries and keys (RoPE); None where
        position enters through the input (sinusoidal, learned) or not at all
    :ivar kv_heads: per query head, the key/value head it reads (grouped-query attention: `values` holds each query
        head's copy of it); None where every query head has its own
    :ivar sinks: ``(heads,)`` each head's learned sink logit the softmax also saw (gpt-oss: `weights` rows then sum
        to less than one), else None
    """

    weights: Tensor
    scores: Tensor
    masked_scores: Tensor
    values: Tensor
    mask: Tensor | None
    residual: Tensor | None = None
    output: Tensor | None = None
    position_bias: Tensor | None = None
    kv_heads: list[int] | None = None
    sinks: Tensor | None = None

    @property
    def head_outputs(self) -> Tensor:
        """``(batch, heads, query_len, d_head)``: each head's output before the output projection (weights x values)."""
        return self.weights @ self.values


def explained_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, dropout_p: float = 0.0,
                        scale: bool | float = True, bias: Tensor | None = None, softcap: float | None = None,
                        sinks: Tensor | None = None) -> tuple[Tensor, AttentionRecord]:
    """The explicit path of `attention`: its output and the record of every intermediate (`softcap`: see
    `attention_scores`; `sinks`: each head's learned sink logit, `sink_softmax`)."""
    _check_qkv(q, k, v, mask)
    _check_bias(q, k, bias)
    return _explicit_attention(q, k, v, mask, dropout_p, scale, bias, softcap, sinks)


def _check_bias(q: Tensor, k: Tensor, bias: Tensor | None) -> None:
    """A score bias must broadcast to ``(batch, heads, query_len, key_len)``."""
    if bias is None:
        return
    target = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    if bias.dim() != 4 or any(b not in (1, t) for b, t in zip(bias.shape, target)):
        raise ValueError(f"bias of shape {tuple(bias.shape)} does not broadcast to scores "
                         f"(batch, heads, query_len, key_len) = {target}")


def _explicit_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, scale: bool | float,
                        bias: Tensor | None = None, softcap: float | None = None,
                        sinks: Tensor | None = None) -> tuple[Tensor, AttentionRecord]:
    scores = attention_scores(q, k, scale, softcap)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    weights = softmax_over_keys(masked, mask) if sinks is None else sink_softmax(masked, sinks)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, AttentionRecord(weights, scores, masked, v, mask, position_bias=bias, sinks=sinks)


def _slow_fused(q: Tensor) -> bool:
    """True where the fused kernel loses to the explicit one: low-precision tensors on the CPU."""
    return q.dtype in (torch.bfloat16, torch.float16) and q.device.type == "cpu"


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, need_weights: bool = False,
              dropout_p: float = 0.0, scale: bool | float = True, impl: str = "auto",
              bias: Tensor | None = None, causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + bias) V`` on ``(batch, heads, len, d)`` tensors.

    Returns ``(output, weights)``; weights ``(batch, heads, query_len, key_len)`` when `need_weights`,
    else None. `impl` picks the path: "math" (explicit), "sdpa" (fused, no weights) or "auto". `bias`
    (broadcastable to the scores): a positional bias added to the scores (ALiBi, T5's relative bias). `causal`: `mask`
    is `causal_mask` of as many queries as keys (a pass from position 0), which the fused kernel then applies itself.
    """
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl must be one of {IMPLEMENTATIONS}, got {impl!r}")
    if need_weights and impl == "sdpa":
        raise ValueError("the fused sdpa path cannot return attention weights; use impl='math' or 'auto'")
    _check_qkv(q, k, v, mask)
    _check_bias(q, k, bias)
    if impl == "sdpa" or (impl == "auto" and not need_weights and not _slow_fused(q)):
        factor = None if scale is True else 1.0 if scale is False else scale ** -0.5
        if causal and bias is None and q.shape[-2] == k.shape[-2]:  # the kernel skips the keys the mask hides
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=factor), None
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=_float_mask(mask, bias, q.dtype), dropout_p=dropout_p,
                                             scale=factor)
        return out, None
    out, record = _explicit_attention(q, k, v, mask, dropout_p, scale, bias)
    return out, (record.weights if need_weights else None)


def _float_mask(mask: Tensor | None, bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """The fused kernel's mask: the boolean mask itself, or the bias with masked keys at -inf."""
    if bias is None:
        return mask
    bias = bias.to(dtype)
    return bias if mask is None else bias.masked_fill(~mask, float("-inf"))


@dataclass
class KVCache:
    """Projected keys and values of one attention layer, ``(batch, heads, len, d_head)``, for decoding.

    :ivar key: the keys (rotated already under RoPE)
    :ivar value: the values
    :ivar positions: ``(batch, len)`` the keys' positions where position enters the scores, else None
    """

    key: Tensor
    value: Tensor
    positions: Tensor | None = None

    def index_select(self, index: Tensor) -> KVCache:
        """Reorder the batch rows (beam search keeps the surviving hypotheses)."""
        positions = None if self.positions is None else self.positions.index_select(0, index)
        return KVCache(self.key.index_select(0, index), self.value.index_select(0, index), positions)


class MultiHeadAttention(nn.Module):
    """``MultiHead(Q, K, V) = Concat(head_1..head_h) W_O`` with ``head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i)``.

    Stateless: weights and caches are returned, never stored on the module.

    :ivar w_q: the query projection (every head's ``W_Q^i`` side by side)
    :ivar w_k: the key projection
    :ivar w_v: the value projection
    :ivar w_o: the output projection ``W_O``
    :ivar dropout: the attention dropout's probability, while training
    :ivar d_head: the width of one head (d_model / heads unless given)
    :ivar inner: the heads side by side: heads * d_head
    :ivar scale: scores are divided by sqrt(d_head) (False: T5's unscaled scores; a number: by its square root)
    :ivar softcap: scores become ``softcap * tanh(scores / softcap)`` before the mask (Gemma 2), else None
    :ivar kv_heads: the key/value heads (fewer than `heads` in grouped-query attention: query head h reads
        key/value head ``h // (heads / kv_heads)``)
    :ivar q_norm: the norm of each head's queries (Qwen3), else None
    :ivar k_norm: the norm of each head's keys, else None
    :ivar joint_qk_norm: `q_norm` and `k_norm` run over all heads together, before the split (OLMo 2)
    :ivar sinks: ``(heads,)`` each head's learned sink logit (gpt-oss, `learned_sinks`), else None
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, d_head: int | None = None, bias: bool = True,
                 scale: bool = True, kv_heads: int | None = None, out_bias: bool | None = None,
                 qk_norm: str | None = None, norm_eps: float = 1e-6, softcap: float | None = None,
                 joint_qk_norm: bool = False, sinks: bool = False) -> None:
        """`bias`: of the Q, K, V projections, and of the output projection unless `out_bias` says otherwise;
        `qk_norm`: the kind of norm (see `make_norm`) each head's queries and keys go through, else None (with
        `joint_qk_norm` all heads' at once); `scale`: see `attention_scores`; `softcap`: the cap of the scores
        (Gemma 2), else None; `sinks`: each head has a learned sink logit (gpt-oss)."""
        super().__init__()
        if d_head is None and d_model % heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by heads ({heads})")
        kv_heads = heads if kv_heads is None else kv_heads
        if heads % kv_heads:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
        self.d_model, self.heads, self.d_head = d_model, heads, d_model // heads if d_head is None else d_head
        self.inner, self.dropout, self.scale, self.kv_heads = heads * self.d_head, dropout, scale, kv_heads
        self.w_q = Linear(d_model, self.inner, bias=bias)
        self.w_k = Linear(d_model, kv_heads * self.d_head, bias=bias)
        self.w_v = Linear(d_model, kv_heads * self.d_head, bias=bias)
        self.w_o = Linear(self.inner, d_model, bias=bias if out_bias is None else out_bias)
        self.softcap = softcap
        self.joint_qk_norm = joint_qk_norm
        q_width, k_width = (self.inner, kv_heads * self.d_head) if joint_qk_norm else (self.d_head, self.d_head)
        self.q_norm = None if qk_norm is None else make_norm(q_width, qk_norm, norm_eps)
        self.k_norm = None if qk_norm is None else make_norm(k_width, qk_norm, norm_eps)
        self.sinks = nn.Parameter(torch.zeros(heads)) if sinks else None

    def split_heads(self, x: Tensor) -> Tensor:
        """``(batch, len, heads * d_head) -> (batch, heads, len, d_head)`` (queries, or the key/value heads)."""
        batch, length, _ = x.shape
        return x.view(batch, length, -1, self.d_head).transpose(1, 2)

    def query_heads(self, x: Tensor) -> Tensor:
        """Keys or values ``(batch, kv_heads, len, d_head)`` repeated for the query heads that read each (itself
        without grouping)."""
        group = self.heads // self.kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=1)

    def query_kv_heads(self) -> list[int] | None:
        """Per query head, the key/value head it reads; None where every query head has its own."""
        return None if self.kv_heads == self.heads else [h // (self.heads // self.kv_heads) for h in range(self.heads)]

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(batch, heads, len, d_head) -> (batch, len, heads * d_head)`` (the concatenation)."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.inner)

    def normed_queries_keys(self, q: Tensor, key: Tensor) -> tuple[Tensor, Tensor]:
        """Queries and keys ``(batch, heads, len, d_head)`` through the query and key norms (each head's: Qwen3; all
        heads' at once: OLMo 2), before any rotation; as they are without the norms."""
        if self.q_norm is None or self.k_norm is None:
            return q, key
        if not self.joint_qk_norm:
            return self.q_norm(q), self.k_norm(key)
        return (self.split_heads(self.q_norm(q.transpose(1, 2).flatten(2))),
                self.split_heads(self.k_norm(key.transpose(1, 2).flatten(2))))

    def project_kv(self, source: Tensor) -> KVCache:
        """Keys and values of `source`, split into heads."""
        return KVCache(self.split_heads(self.w_k(source)), self.split_heads(self.w_v(source)))

    def project(self, query: Tensor, source: Tensor | None = None) -> tuple[Tensor, KVCache]:
        """Queries of `query` and keys/values of `source` (of `query` itself for self-attention), split into heads."""
        return self.split_heads(self.w_q(query)), self.project_kv(query if source is None else source)

    def forward(self, query: Tensor, source: Tensor | None = None, mask: Tensor | None = None, *,
                need_weights: bool | str = False, cache: KVCache | None = None, append_to_cache: bool = False,
                head_mask: Tensor | None = None, position: ScorePosition | None = None,
                head_patch: LayerPatch | None = None, causal: bool = False) -> tuple[Tensor, Tensor | None, KVCache]:
        """Attend from `query` ``(batch, q_len, d_model)`` to `source` (self-attention when None).

        `cache` holds keys/values already projected: with `append_to_cache` the new ones are appended
        (incremental self-attention), otherwise they are used as they are (cross-attention memory).
        `head_mask` ``(heads,)`` scales each head's output (0 switches a head off); `head_patch`: heads whose outputs
        come from another run (`swapped`), before the mask. `position` (self-attention):
        the rotation of the new queries and keys or the bias on the scores; `causal`: `mask` is the plain causal mask
        of a pass from position 0 (`attention`'s fused kernel applies it itself). Returns
        ``(output, AttentionRecord when need_weights else None, cache)``; ``need_weights="recipe"``: a `ScoreRecipe`
        (the queries and keys the scores need, batch of one) in the record's place, no maps made.
        """
        if query.dim() != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"query must be (batch, len, d_model={self.d_model}), got {tuple(query.shape)}")
        if cache is not None and not append_to_cache:
            q, kv = self.split_heads(self.w_q(query)), cache
        else:
            q, kv = self.project(query, source)
            if self.q_norm is not None and self.k_norm is not None:  # Qwen3, OLMo 2: before the rotation
                q, key = self.normed_queries_keys(q, kv.key)
                kv = KVCache(key, kv.value)
            if position is not None:
                kv = KVCache(kv.key, kv.value, position.positions)
                if position.rotation is not None:
                    q, kv.key = rotate(q, *position.rotation), rotate(kv.key, *position.rotation)
            if cache is not None:
                kv = _appended(cache, kv, None if position is None else position.key_positions)
        recipe = None  # need_weights="recipe": what the scores need, in place of the maps (a trace's long prompt)
        if need_weights == "recipe":
            recipe = query_recipe(q, kv.key, self.query_kv_heads(), self.scale, self.softcap, self.sinks)
            need_weights = False
        dropout_p = self.dropout if self.training else 0.0
        bias = None if position is None else position.bias
        key, value = self.query_heads(kv.key), self.query_heads(kv.value)
        record = None
        if need_weights or self.softcap is not None or self.sinks is not None:  # the fused kernel has neither
            out, record = explained_attention(q, key, value, mask, dropout_p=dropout_p, scale=self.scale, bias=bias,
                                              softcap=self.softcap, sinks=self.sinks)
            if position is not None and position.key_rotation is not None:
                record.position_bias = record.scores - attention_scores(
                    _unrotated(q, position.rotation), _unrotated(key, position.key_rotation), self.scale,
                    self.softcap)
            record.kv_heads = self.query_kv_heads()
            record = record if need_weights else None
        else:
            out, _ = attention(q, key, value, mask, dropout_p=dropout_p, scale=self.scale, bias=bias, causal=causal)
        out = swapped(out, head_patch)
        if head_mask is not None:
            if head_mask.shape != (self.heads,):
                raise ValueError(f"head_mask must have shape (heads={self.heads},), got {tuple(head_mask.shape)}")
            out = out * head_mask.to(out.dtype)[None, :, None, None]
        return self.w_o(self.merge_heads(out)), record if recipe is None else recipe, kv


def _appended(cache: KVCache, new: KVCache, positions: Tensor | None) -> KVCache:
    """The cache with the new keys and values after the old ones, keeping `positions` (every key's, where position
    enters the scores: one tensor the stack's layers share, not concatenated per layer)."""
    return KVCache(torch.cat([cache.key, new.key], dim=2), torch.cat([cache.value, new.value], dim=2), positions)


def _unrotated(x: Tensor, rotation: tuple[Tensor, Tensor]) -> Tensor:
    """`x` turned back by its rotation (RoPE's rotation is orthogonal: the same angles, negated; divided by the
    squared length of (cos, sin), YaRN's attention factor squared, 1 otherwise)."""
    cos, sin = rotation
    turned, scale = rotate(x, cos, -sin), (cos * cos + sin * sin)[:, None].to(x.dtype)
    width = scale.shape[-1]  # partial rotary (GPT-NeoX, Phi): the dimensions past it were not turned
    return turned / scale if width == x.shape[-1] else torch.cat((turned[..., :width] / scale, turned[..., width:]),
                                                                 dim=-1)
