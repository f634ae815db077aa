"""DeBERTa's disentangled attention (He et al. 2021; DeBERTa-v2 / v3): position is not added to the input but enters
each head's scores as two terms beside the content-to-content one, through a table of relative-position embeddings
that every layer shares and projects with its own query and key projections (or with separate ones).

For query i and key j, with δ = bucket(i - j) (log-spaced beyond half the buckets) and S the table's half size::

    score(i, j) = (q_i · k_j  +  q_i · Kr[δ + S]  +  k_j · Qr[δ + S]) / sqrt(d_head * (1 + terms))
                   content       content-to-position  position-to-content

Kr and Qr are the relative embeddings projected as keys and as queries; the index is clamped to the table. Each
call returns a `DisentangledRecord`: the three terms, each already divided by the scale, add up to its ``scores``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from .attention import AttentionRecord, KVCache, MultiHeadAttention, attention_scores, explained_attention
from .linear import Linear
from .norms import make_norm, normed


def log_bucket_position(relative: Tensor, buckets: int, max_position: int) -> Tensor:
    """The bucket of each relative position (transformers' ``make_log_bucket_position``): kept as it is up to half
    the buckets, log-spaced beyond, with its sign."""
    sign = torch.sign(relative)
    mid = buckets // 2
    absolute = torch.where((relative < mid) & (relative > -mid), torch.tensor(mid - 1).type_as(relative),
                           torch.abs(relative))
    log_position = torch.ceil(torch.log(absolute / mid) / torch.log(torch.tensor((max_position - 1) / mid))
                              * (mid - 1)) + mid
    return torch.where(absolute <= mid, relative.type_as(log_position), log_position * sign).long()


def relative_positions(length: int, buckets: int, max_position: int, device: torch.device) -> Tensor:
    """``(len, len)`` the relative position ``i - j`` of query i and key j, bucketed where `buckets` > 0."""
    ids = torch.arange(length, dtype=torch.long, device=device)
    relative = ids[:, None] - ids[None, :]
    return log_bucket_position(relative, buckets, max_position) if buckets > 0 else relative


@dataclass
class DisentangledPosition:
    """What every layer's disentangled attention reads in one call.

    :ivar relative: ``(len, len)`` the (bucketed) relative position of query i and key j
    :ivar index: ``(len, len)`` the row of the table that pair reads: ``relative + span``, clamped to the table
    :ivar embeddings: ``(2 * span, d_model)`` the relative-position embeddings (normed where the model norms them)
    """

    relative: Tensor
    index: Tensor
    embeddings: Tensor


class RelativeEmbeddings(nn.Module):
    """The table of relative-position embeddings one DeBERTa encoder shares across its layers.

    :ivar embedding: ``(2 * span, d_model)``: span is position_buckets, else max_relative_positions
    :ivar norm: its LayerNorm (norm_rel_ebd "layer_norm"), else None
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.span = cfg.position_buckets or cfg.max_relative_positions
        self.buckets, self.max_position = cfg.position_buckets, cfg.max_relative_positions
        self.embedding = nn.Embedding(2 * self.span, cfg.d_model)
        self.norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if cfg.relative_norm else None

    def forward(self, length: int) -> DisentangledPosition:
        """The relative positions of a sequence of `length` tokens and the table they index."""
        table = self.embedding.weight
        relative = relative_positions(length, self.buckets, self.max_position, table.device)
        index = torch.clamp(relative + self.span, 0, 2 * self.span - 1)
        return DisentangledPosition(relative, index, table if self.norm is None else normed(self.norm, table))


@dataclass
class DisentangledRecord(AttentionRecord):
    """An `AttentionRecord` whose ``scores`` split into DeBERTa's three terms, each ``(batch, heads, len, len)`` and
    divided by the scale already: ``scores = content + content_to_position + position_to_content`` (a term the model
    does not compute is zeros).

    :ivar content: ``q_i · k_j`` (content to content)
    :ivar content_to_position: ``q_i · Kr[δ(i, j)]`` (c2p)
    :ivar position_to_content: ``k_j · Qr[δ(i, j)]`` (p2c)
    """

    content: Tensor | None = None
    content_to_position: Tensor | None = None
    position_to_content: Tensor | None = None


class DisentangledAttention(MultiHeadAttention):
    """BERT's self-attention projections (with biases) plus DeBERTa's relative terms.

    :ivar terms: the position terms computed ("c2p", "p2c")
    :ivar share_att_key: the relative embeddings go through ``w_q`` and ``w_k``
    :ivar pos_key: the relative embeddings' key projection for c2p without `share_att_key`, else None
    :ivar pos_query: their query projection for p2c without `share_att_key`, else None
    :ivar factor: the scale's factor: 1 + the number of position terms
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg.d_model, cfg.heads, cfg.attention_dropout, cfg.d_kv)
        self.terms, self.share_att_key, self.factor = cfg.pos_att_type, cfg.share_att_key, 1 + len(cfg.pos_att_type)
        separate = not cfg.share_att_key
        self.pos_key = Linear(cfg.d_model, self.inner) if separate and "c2p" in self.terms else None
        self.pos_query = Linear(cfg.d_model, self.inner) if separate and "p2c" in self.terms else None

    def position_terms(self, q: Tensor, k: Tensor, position: DisentangledPosition) -> dict[str, Tensor]:
        """The c2p and p2c terms the model computes, ``(batch, heads, len, len)``, divided by the scale."""
        scale = math.sqrt(self.d_head * self.factor)
        index = position.index[None, None].expand(q.shape[0], self.heads, -1, -1)
        table = position.embeddings[None]
        found = {}
        if "c2p" in self.terms:
            keys = self.split_heads((self.w_k if self.share_att_key else self.pos_key)(table))  # (1, h, 2S, d)
            found["c2p"] = torch.gather(q @ keys.transpose(-1, -2), -1, index) / scale
        if "p2c" in self.terms:
            queries = self.split_heads((self.w_q if self.share_att_key else self.pos_query)(table))
            # k_j · Qr[-bucket(j - i) + S]: the same row as c2p's (the bucketing is odd), gathered along the keys
            found["p2c"] = torch.gather(k @ queries.transpose(-1, -2), -1, index.transpose(-1, -2)
                                        ).transpose(-1, -2) / scale
        return found

    def forward(self, query: Tensor, source: Tensor | None = None, mask: Tensor | None = None, *,
                need_weights: bool | str = False, cache: KVCache | None = None, append_to_cache: bool = False,
                head_mask: Tensor | None = None, position: DisentangledPosition | None = None,
                ) -> tuple[Tensor, DisentangledRecord | None, KVCache]:
        """Self-attention over `query` ``(batch, len, d_model)`` with the relative terms of `position`; returns the
        output, a `DisentangledRecord` with `need_weights` (else None) and the keys and values."""
        if source is not None or cache is not None or position is None:
            raise ValueError("disentangled attention is self-attention over a whole sequence with its relative "
                             "positions (no source, no cache)")
        q, kv = self.project(query)
        terms = self.position_terms(q, kv.key, position)
        bias = sum(terms.values()) if terms else None
        dropout_p = self.dropout if self.training else 0.0
        out, plain = explained_attention(q, kv.key, kv.value, mask, dropout_p=dropout_p,
                                         scale=self.d_head * self.factor, bias=bias)
        record = None
        if need_weights:
            zeros = torch.zeros_like(plain.scores)
            record = DisentangledRecord(plain.weights, plain.scores, plain.masked_scores, plain.values, plain.mask,
                                        position_bias=bias,
                                        content=attention_scores(q, kv.key, self.d_head * self.factor),
                                        content_to_position=terms.get("c2p", zeros),
                                        position_to_content=terms.get("p2c", zeros))
        if head_mask is not None:
            out = out * head_mask.to(out.dtype)[None, :, None, None]
        return self.w_o(self.merge_heads(out)), record, kv
