"""Contributions read off one forward pass: value-weighted attention (Kobayashi et al., 2020) and ALTI / ALTI+
(Ferrando et al., 2022), computed from each layer's `AttentionRecord` and the layer's own parameters.

Head h of a layer maps key token j to ``f_h(x_j) = v_hj W_O^h`` (its value vector through its slice of the output
projection), so the layer's attention output for query i is ``sum_h sum_j alpha_hij f_h(x_j) + b_O``.

- **Value-weighted attention**: ``alpha_hij * ||f_h(x_j)||``: a weight on a token whose transformed vector is
  short counts for little.
- **ALTI**: the sub-layer's output ``y_i`` (after the residual and, post-LN, the LayerNorm, linearised with the
  actual standard deviation of the sum) is a sum of one vector per input token, ``T_i(x_j)`` (the residual stream
  joins the query's own token); token j contributes ``max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1)``, rows normalised
  to 1. Feed-forward layers act on each position alone and are not decomposed.
- **ALTI+** for an encoder-decoder: the encoder's per-layer contributions are rolled out (matrix products); in
  each decoder layer the self-attention mixes the target prefix and the cross-attention mixes the encoder outputs
  (rolled back to the source tokens) with the decoder's own residual stream. Each decoder position ends with one
  distribution over ``[source tokens | target prefix]``: the source share and the prefix share sum to 1.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..nn.attention import AttentionRecord, MultiHeadAttention
from ..nn.causal_lm import CausalLM, CausalLMOutput
from ..nn.encoder_lm import MaskedLM, MaskedLMOutput
from ..nn.kinds import ATTENTION_KINDS
from ..nn.model import Seq2SeqOutput, Transformer
from ..nn.norms import RMSNorm

TINY = 1e-12


def attention_block(network: Transformer | CausalLM, kind: str, layer: int) -> tuple[MultiHeadAttention, nn.Module]:
    """The attention module of one sub-layer and the residual connection around it (a language model's: its
    decoder self-attention)."""
    return network.attention_block(layer) if isinstance(network, CausalLM) else network.attention_block(kind, layer)


def transformed_values(network: Transformer | CausalLM, record: AttentionRecord, kind: str, layer: int) -> Tensor:
    """``f_h(x_j)``: every head's value vectors through its slice of W_O, ``(batch, heads, key_len, d_model)``."""
    return head_outputs(network, record.values, kind, layer)


def head_outputs(network: Transformer | CausalLM, values: Tensor, kind: str, layer: int) -> Tensor:
    """`values` ``(batch, heads, key_len, d_head)`` (each query head's) through each head's slice of W_O."""
    attention, _ = attention_block(network, kind, layer)
    heads, d_head, d_model = attention.heads, attention.d_head, attention.d_model
    if values.shape[1:] != (heads, values.shape[2], d_head):
        raise ValueError(f"the record's values {tuple(values.shape)} are not (batch, heads={heads}, "
                         f"key_len, d_head={d_head}) of {kind} layer {layer}")
    per_head = attention.w_o.weight.view(d_model, heads, d_head).permute(1, 2, 0)  # (heads, d_head, d_model)
    return torch.einsum("bhkc,hcd->bhkd", values.to(per_head.dtype), per_head)


def value_weighted(network: Transformer | CausalLM, record: AttentionRecord, kind: str, layer: int) -> Tensor:
    """``alpha_hij * ||f_h(x_j)||_2``, ``(batch, heads, query_len, key_len)``."""
    norms = transformed_values(network, record, kind, layer).norm(dim=-1)  # (batch, heads, key_len)
    return record.weights.to(norms.dtype) * norms[:, :, None, :]


def token_vectors(network: Transformer | CausalLM, record: AttentionRecord, kind: str, layer: int) -> Tensor:
    """``T_i(x_j)``: the vector each input token adds to query i's sub-layer output, ``(batch, q, k, d_model)``;
    for cross-attention one more "token" at the end, the decoder's own residual stream."""
    if record.residual is None or record.output is None:
        raise ValueError(f"the {kind} layer {layer} record carries no residual stream (records from the model's "
                         "own forward pass do)")
    f = transformed_values(network, record, kind, layer)
    parts = torch.einsum("bhqk,bhkd->bqkd", record.weights.to(f.dtype), f)
    residual = record.residual.to(f.dtype)
    if kind == "cross":
        parts = torch.cat([parts, residual[:, :, None, :]], dim=2)
    else:
        if parts.shape[1] != parts.shape[2]:
            raise ValueError(f"{kind} layer {layer}: a self-attention record of {parts.shape[1]} queries and "
                             f"{parts.shape[2]} keys (decompose a full pass, not one decoding step)")
        index = torch.arange(parts.shape[1], device=parts.device)
        parts[:, index, index] += residual
    attention, connection = attention_block(network, kind, layer)
    if getattr(connection, "post_norm", None) is not None:
        raise ValueError(f"ALTI does not decompose {kind} layer {layer}'s norm of the attention output (Gemma 2 / "
                         "3's sandwich norm, OLMo 2's): its parts do not add up to the output")
    if connection.pre:  # y = x + attention(LayerNorm(x)): already a sum of the parts (and the bias)
        return parts
    total = parts.sum(dim=2)  # what the norm normalised
    if attention.w_o.bias is not None:
        total = total + attention.w_o.bias.to(f.dtype)
    norm = connection.norm
    if isinstance(norm, RMSNorm):  # no mean subtracted: each part is divided by the sum's root mean square
        scale = (total.pow(2).mean(dim=-1) + norm.eps).sqrt()
        return parts / scale[:, :, None, None] * norm.weight.to(f.dtype)
    std = (total.var(dim=-1, unbiased=False) + norm.eps).sqrt()
    centred = parts - parts.mean(dim=-1, keepdim=True)
    return centred / std[:, :, None, None] * norm.weight.to(f.dtype)


def sandwich_norm_layer(network: CausalLM) -> int | None:
    """The first layer whose attention output is normed before the residual (Gemma 2 / 3's sandwich norm, OLMo 2's),
    which ALTI cannot decompose; None: ALTI runs on every layer."""
    for layer in range(len(network.layers)):
        if getattr(network.attention_block(layer)[1], "post_norm", None) is not None:
            return layer
    return None


def alti_block(network: Transformer | CausalLM, record: AttentionRecord, kind: str, layer: int) -> Tensor:
    """ALTI contributions of one attention sub-layer: ``(batch, q, k)`` (``k + 1`` for cross-attention, the last
    column the residual stream), non-negative, each row summing to 1."""
    parts = token_vectors(network, record, kind, layer)
    output = record.output.to(parts.dtype)[:, :, None, :]
    closeness = output.abs().sum(dim=-1) - (output - parts).abs().sum(dim=-1)
    contributions = closeness.clamp(min=0.0)
    return contributions / contributions.sum(dim=-1, keepdim=True).clamp(min=TINY)


def alti_blocks(network: Transformer, out: Seq2SeqOutput) -> dict[str, list[Tensor]]:
    """`alti_block` of every attention sub-layer of a forward pass, per kind and layer (computed once, shared by
    the rollout, ALTI+ and the per-layer maps)."""
    return {kind: [alti_block(network, record, kind, layer) for layer, record in enumerate(out.records(kind))]
            for kind in ATTENTION_KINDS}


def rollout(blocks: list[Tensor]) -> Tensor:
    """The product of a stack's per-layer contributions, last layer leftmost."""
    if not blocks:
        raise ValueError("the forward pass recorded no layer (run it with need_weights=True)")
    rolled = blocks[0]
    for block in blocks[1:]:
        rolled = block @ rolled
    return rolled


def encoder_rollout(network: Transformer, out: Seq2SeqOutput) -> Tensor:
    """``(batch, src_len, src_len)``: how much each encoder output draws from each source token (ALTI, rolled
    out over the encoder layers)."""
    return rollout([alti_block(network, r, "encoder", i) for i, r in enumerate(out.encoder_records)])


def alti_plus(network: Transformer, out: Seq2SeqOutput, blocks: dict[str, list[Tensor]] | None = None) -> Tensor:
    """ALTI+: ``(batch, tgt_len, src_len + tgt_len)``: for each decoder position, the share of each source token
    and of each target-prefix token (decoder input); every row sums to 1. `blocks`: `alti_blocks` of `out`, when
    already computed."""
    blocks = alti_blocks(network, out) if blocks is None else blocks
    encoder = rollout(blocks["encoder"])
    batch, src_len, _ = encoder.shape
    tgt_len = out.logits.shape[1]
    dtype, device = encoder.dtype, encoder.device
    source_rows = torch.cat([encoder, torch.zeros(batch, src_len, tgt_len, dtype=dtype, device=device)], dim=2)
    mix = torch.cat([torch.zeros(batch, tgt_len, src_len, dtype=dtype, device=device),
                     torch.eye(tgt_len, dtype=dtype, device=device).expand(batch, -1, -1)], dim=2)
    for self_block, cross in zip(blocks["decoder"], blocks["cross"]):
        mix = self_block @ mix
        mix = cross[:, :, :src_len] @ source_rows + cross[:, :, src_len:] * mix
    return mix


def self_alti(network: CausalLM | MaskedLM, out: CausalLMOutput | MaskedLMOutput, kind: str = "decoder"
              ) -> tuple[Tensor, list[Tensor]]:
    """ALTI of a self-attention stack (a language model's, `kind` "decoder"; an encoder's, "encoder"):
    ``(batch, len, len)``, each position's share of every token it sees, rolled out over the layers (rows sum to 1),
    and each layer's own block."""
    blocks = [alti_block(network, record, kind, layer) for layer, record in enumerate(out.records)]
    return rollout(blocks), blocks
