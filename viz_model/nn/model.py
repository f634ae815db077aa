"""The encoder-decoder Transformer of "Attention Is All You Need", instrumented.

Read top to bottom: embeddings + positions, encoder layer, decoder layer, the two stacks, the model.
Every forward can return each layer's `AttentionRecord` (per-head weights ``(batch, heads, query_len, key_len)``,
the scores before and after masking, the value vectors) as ordinary return values; nothing is ever stored on a
module, so one model serves many threads at inference.
Sub-layers are wrapped as ``LayerNorm(x + Dropout(Sublayer(x)))`` ("post", the paper) or
``x + Dropout(Sublayer(LayerNorm(x)))`` ("pre", e.g. the Annotated Transformer; the stack then ends with a LayerNorm).
What imported families do differently (T5's RMS norm and unscaled scores, BART's embedding norm, ...) are settings of
`ModelConfig` read here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ModelConfig
from ..config.checks import check_int
from .alibi import ALiBi
from .attention import AttentionRecord, KVCache, MultiHeadAttention, causal_mask, combine_masks, padding_mask
from .kinds import check_kind
from .linear import Linear, linear
from .norms import make_norm, normed
from .position_setup import input_positions, score_schemes
from .positional import SinusoidalPositions, check_positions, normal_embedding
from .relative_bias import RelativePositionBias
from .rotary import Rotary
from .score_position import ScorePosition


@dataclass
class HeadMask:
    """Per-kind ``(layers, heads)`` multipliers on each head's output; 0 switches a head off (ablation).

    :ivar encoder: ``(encoder_layers, heads)`` for encoder self-attention; None: every head as it is
    :ivar decoder: ``(decoder_layers, heads)`` for decoder self-attention
    :ivar cross: ``(decoder_layers, heads)`` for encoder-decoder attention
    """

    encoder: Tensor | None = None
    decoder: Tensor | None = None
    cross: Tensor | None = None

    def layer(self, kind: str, index: int) -> Tensor | None:
        """The ``(heads,)`` multipliers of one kind's layer, or None."""
        mask = getattr(self, kind)
        return None if mask is None else mask[index]


def gelu_new(x: Tensor) -> Tensor:
    """GELU's tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (T5 v1.1's gated GELU,
    transformers' ``NewGELUActivation``) in PyTorch's one kernel: within a float32 ulp of transformers' eight
    operations, which a decoding step would pay in every layer."""
    return F.gelu(x, approximate="tanh")


ACTIVATION_FUNCTIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "silu": F.silu, "gelu": F.gelu,
                                                               "gelu_new": gelu_new}


class FeedForward(nn.Module):
    """``FFN(x) = max(0, x W1 + b1) W2 + b2`` (the paper's ReLU; SiLU or GELU for imported models), at every
    position alike; gated (T5 v1.1): ``(act(x W1) * x W3) W2``.

    :ivar w_1: the activated layer
    :ivar w_3: the gated variant's linear layer (Llama's name for it), else None
    :ivar w_2: the output layer
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", gated: bool = False,
                 bias: bool = True) -> None:
        super().__init__()
        self.w_1 = Linear(d_model, d_ff, bias=bias)
        self.w_3 = Linear(d_model, d_ff, bias=bias) if gated else None
        self.w_2 = Linear(d_ff, d_model, bias=bias)
        self.activation = ACTIVATION_FUNCTIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.activation(self.w_1(x))
        return self.w_2(hidden if self.w_3 is None else hidden * self.w_3(x))


class Residual(nn.Module):
    """One residual sub-layer connection with its LayerNorm, post-LN or pre-LN.

    `enter` gives the sub-layer's input, `leave` adds its output back: a layer calls its sub-layer between the
    two and keeps whatever else the sub-layer returns (attention records) as plain values."""

    def __init__(self, d_model: int, dropout: float, norm: str, normalization: str = "layer",
                 eps: float = 1e-5, sandwich: bool = False, input_norm: bool = True) -> None:
        """`sandwich` (pre-norm): the sub-layer's output is normed too before it is added (Gemma 2's post norms);
        without `input_norm` (and with `sandwich`) only the output is (OLMo 2: ``norm`` is then the identity)."""
        super().__init__()
        self.norm = make_norm(d_model, normalization, eps) if input_norm else nn.Identity()
        self.post_norm = make_norm(d_model, normalization, eps) if sandwich else None
        self.dropout = nn.Dropout(dropout)
        self.pre = norm == "pre"

    def enter(self, x: Tensor) -> Tensor:
        """The sub-layer's input: ``LayerNorm(x)`` (pre-LN) or `x` itself (post-LN); the norm without its module
        call (~18 of them per decoding step)."""
        return normed(self.norm, x) if self.pre else x

    def leave(self, x: Tensor, out: Tensor) -> Tensor:
        """``x + Dropout(out)`` (pre-LN) or ``LayerNorm(x + Dropout(out))`` (post-LN); dropout only while training
        (at inference not even the module call)."""
        out = out if self.post_norm is None else normed(self.post_norm, out)
        added = x + (self.dropout(out) if self.training else out)
        return added if self.pre else normed(self.norm, added)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return self.leave(x, sublayer(self.enter(x)))


def _attention(cfg: ModelConfig) -> MultiHeadAttention:
    """One attention sub-layer of `cfg` (head width, biases, scaling)."""
    qkv_bias = cfg.attention_bias if cfg.qkv_bias is None else cfg.qkv_bias
    scale = cfg.scale_scores if cfg.query_scalar is None else cfg.query_scalar
    return MultiHeadAttention(cfg.d_model, cfg.heads, cfg.attention_dropout, cfg.d_kv, qkv_bias, scale,
                              cfg.kv_heads, cfg.attention_bias, cfg.normalization if cfg.qk_norm else None,
                              cfg.norm_eps, cfg.attention_softcap, cfg.joint_qk_norm, cfg.learned_sinks)


def _feed_forward(cfg: ModelConfig) -> FeedForward:
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.gated_ffn, cfg.ffn_bias)


def _residual(cfg: ModelConfig) -> Residual:
    return Residual(cfg.d_model, cfg.dropout, cfg.norm, cfg.normalization, cfg.norm_eps, cfg.sandwich_norm,
                    cfg.input_norm)


def _with_stream(record: AttentionRecord | None, entering: Tensor, leaving: Tensor) -> AttentionRecord | None:
    """The record with the residual stream around its sub-layer filled in (the record is the call's own)."""
    if isinstance(record, AttentionRecord):  # not a `ScoreRecipe` (need_weights="recipe")
        record.residual, record.output = entering, leaving
    return record


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = _attention(cfg)
        self.ffn = _feed_forward(cfg)
        self.attn_residual = _residual(cfg)
        self.ffn_residual = _residual(cfg)

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False,
                head_mask: Tensor | None = None, position: ScorePosition | None = None,
                ) -> tuple[Tensor, AttentionRecord | None]:
        """Returns the layer's output and, with `need_weights`, the record of its self-attention (`position`: how
        position enters its scores, where it does)."""
        h = self.attn_residual.enter(x)
        out, record, _ = self.self_attn(h, None, mask, need_weights=need_weights, head_mask=head_mask,
                                        position=position)
        y = self.attn_residual.leave(x, out)
        return self.ffn_residual.forward(y, self.ffn), _with_stream(record, x, y)  # forward: no module call


@dataclass
class LayerCache:
    """Decoding cache of one decoder layer: its own past keys/values and the projected encoder memory."""

    self_attn: KVCache | None
    cross_attn: KVCache | None

    def reorder(self, index: Tensor, same_source: bool = False) -> LayerCache:
        """Keep the batch rows in `index`. With `same_source` (rows only move among copies of one source, as in
        beam search) the encoder memory is identical for them, so its cache is kept as it is."""
        self_attn = self.self_attn.index_select(index) if self.self_attn is not None else None
        if same_source or self.cross_attn is None:
            return LayerCache(self_attn, self.cross_attn)
        return LayerCache(self_attn, self.cross_attn.index_select(index))


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention, then the feed-forward network."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = _attention(cfg)
        self.cross_attn = _attention(cfg)
        self.ffn = _feed_forward(cfg)
        self.self_residual = _residual(cfg)
        self.cross_residual = _residual(cfg)
        self.ffn_residual = _residual(cfg)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor | None,
                need_weights: bool = False, cache: LayerCache | None = None,
                head_masks: tuple[Tensor | None, Tensor | None] = (None, None),
                position: ScorePosition | None = None,
                ) -> tuple[Tensor, AttentionRecord | None, AttentionRecord | None, LayerCache]:
        """Returns the output, the self- and cross-attention records (with `need_weights`) and the new cache
        (`position`: how position enters the self-attention's scores, where it does; cross-attention has none)."""
        incremental = cache is not None
        h = self.self_residual.enter(x)
        out, self_record, self_kv = self.self_attn(
            h, None, self_mask, need_weights=need_weights, head_mask=head_masks[0],
            cache=cache.self_attn if incremental else None, append_to_cache=True, position=position)
        y = self.self_residual.leave(x, out)
        self_record = _with_stream(self_record, x, y)
        h = self.cross_residual.enter(y)
        out, cross_record, cross_kv = self.cross_attn(
            h, memory, cross_mask, need_weights=need_weights, head_mask=head_masks[1],
            cache=cache.cross_attn if incremental else None)
        z = self.cross_residual.leave(y, out)
        cross_record = _with_stream(cross_record, y, z)
        out = self.ffn_residual.forward(z, self.ffn)  # forward itself: no module call (~18 a decoding step)
        return out, self_record, cross_record, LayerCache(self_kv, cross_kv)


def with_cpu_storage(model: nn.Module) -> nn.Module:
    """`model`, built on the meta device, with uninitialised CPU storage for every parameter and buffer (a tied
    matrix gets one) and its sinusoid tables computed: what a weights file then fills."""
    storage: dict[int, Tensor] = {}  # by the meta tensor's id

    def on_cpu(meta: Tensor) -> Tensor:
        if id(meta) not in storage:
            empty = torch.empty(meta.shape, dtype=meta.dtype)
            storage[id(meta)] = nn.Parameter(empty, meta.requires_grad) if isinstance(meta, nn.Parameter) else empty
        return storage[id(meta)]

    for module in model.modules():  # by hand: `to_empty` imports ~500 modules of PyTorch (~35 MB resident)
        for tensors in (module._parameters, module._buffers):
            for name, tensor in tensors.items():
                if tensor is not None:
                    tensors[name] = on_cpu(tensor)
    for module in model.modules():
        if isinstance(module, SinusoidalPositions):
            module.fill_table()
    return model


def _positions(ids: Tensor, offset: int, position_ids: Tensor | None) -> Tensor:
    """``(batch, len)`` the positions of `ids`: `position_ids`, else ``offset, offset + 1, ..`` in every row."""
    if position_ids is not None:
        return position_ids.expand(ids.shape[0], -1)
    return torch.arange(offset, offset + ids.shape[1], device=ids.device).expand(ids.shape[0], -1)


def _weights(records: list[AttentionRecord]) -> list[Tensor]:
    return [record.weights for record in records]


@dataclass
class EncoderOutput:
    """What `Transformer.encode` returns.

    :ivar hidden: ``(batch, src_len, d_model)`` the encoder's output (the memory cross-attention reads)
    :ivar mask: ``(batch, 1, 1, src_len)`` the source padding mask, True = real token
    :ivar records: per layer, the self-attention's `AttentionRecord` (with ``need_weights``)
    :ivar has_padding: False when every key is a real token: attention then needs no mask
    """

    hidden: Tensor
    mask: Tensor
    records: list[AttentionRecord] = field(default_factory=list)
    has_padding: bool = True

    @property
    def attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, src_len, src_len)``."""
        return _weights(self.records)

    @property
    def attention_mask(self) -> Tensor | None:
        """The mask cross-attention applies (None when nothing is padding, which lets the fused kernel run bare)."""
        return self.mask if self.has_padding else None

    def repeated(self, times: int) -> EncoderOutput:
        """Each source row `times` times over (one per beam), without its records."""
        index = torch.arange(self.hidden.shape[0], device=self.hidden.device).repeat_interleave(times)
        return EncoderOutput(self.hidden.index_select(0, index), self.mask.index_select(0, index),
                             has_padding=self.has_padding)


@dataclass
class DecoderOutput:
    """What `Transformer.decode` returns.

    :ivar hidden: ``(batch, tgt_len, d_model)`` the decoder's output, before the logits
    :ivar self_records: per layer, the masked self-attention's `AttentionRecord` (with ``need_weights``)
    :ivar cross_records: per layer, the cross-attention's `AttentionRecord`
    :ivar cache: per layer, the keys and values incremental decoding reuses
    :ivar states: with ``states=True``, the residual stream entering layer 0 and leaving each layer (the logit lens)
    """

    hidden: Tensor
    self_records: list[AttentionRecord] = field(default_factory=list)
    cross_records: list[AttentionRecord] = field(default_factory=list)
    cache: list[LayerCache] = field(default_factory=list)
    states: list[Tensor] = field(default_factory=list)

    @property
    def self_attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, tgt_len, tgt_len)``."""
        return _weights(self.self_records)

    @property
    def cross_attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, tgt_len, src_len)``."""
        return _weights(self.cross_records)


@dataclass
class Seq2SeqOutput:
    """Everything one teacher-forced pass computed (Hugging Face naming); records with need_weights.

    :ivar logits: ``(batch, tgt_len, vocab)`` pre-softmax scores of each next token
    :ivar encoder_records: per layer, the encoder self-attention's `AttentionRecord`
    :ivar decoder_records: per layer, the masked decoder self-attention's
    :ivar cross_records: per layer, the encoder-decoder attention's
    :ivar source_mask: ``(batch, 1, 1, src_len)`` True = real source token
    :ivar target_mask: the decoder's self-attention mask (causal and padding), True = may attend
    """

    logits: Tensor
    encoder_records: list[AttentionRecord]
    decoder_records: list[AttentionRecord]
    cross_records: list[AttentionRecord]
    source_mask: Tensor
    target_mask: Tensor

    @property
    def encoder_attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, src_len, src_len)``."""
        return _weights(self.encoder_records)

    @property
    def decoder_attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, tgt_len, tgt_len)``."""
        return _weights(self.decoder_records)

    @property
    def cross_attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, tgt_len, src_len)``."""
        return _weights(self.cross_records)

    def records(self, kind: str) -> list[AttentionRecord]:
        """The per-layer records of one attention kind ("encoder", "decoder" or "cross")."""
        check_kind(kind)
        return {"encoder": self.encoder_records, "decoder": self.decoder_records, "cross": self.cross_records}[kind]


class Transformer(nn.Module):
    """Encoder-decoder Transformer with a shared source/target vocabulary.

    :ivar config: its `ModelConfig`
    :ivar src_embedding: the source embedding (the target's and the output projection's too when shared)
    :ivar tgt_embedding: the target embedding
    :ivar output_projection: the pre-softmax projection when not tied to the embeddings, else None
    :ivar encoder_layers: the encoder's layers (self-attention, feed-forward)
    :ivar decoder_layers: the decoder's layers (masked self-attention, cross-attention, feed-forward)
    :ivar encoder_norm: the final LayerNorm of a pre-norm encoder, else None
    :ivar decoder_norm: the final LayerNorm of a pre-norm decoder, else None
    :ivar encoder_embedding_norm: the norm on the encoder's embeddings (config ``embedding_norm``), else None
    :ivar decoder_embedding_norm: the norm on the decoder's embeddings, else None
    :ivar encoder_position_bias: T5's relative bias table of the encoder (``positional="relative"``), else None
    :ivar decoder_position_bias: the decoder's, else None
    :ivar parameter_free_scheme: RoPE's rotation or ALiBi's slopes (``positional`` "rope" / "alibi"), else None
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.src_embedding = normal_embedding(cfg.vocab_size, cfg.d_model, cfg.d_model ** -0.5, cfg.pad_id)
        if cfg.share_embeddings:  # 3-way tying: source, target and pre-softmax share one matrix (unless tied_head off)
            self.tgt_embedding = self.src_embedding
            self.output_projection = None if cfg.tied_head else Linear(cfg.d_model, cfg.vocab_size, bias=False)
        else:
            self.tgt_embedding = normal_embedding(cfg.vocab_size, cfg.d_model, cfg.d_model ** -0.5, cfg.pad_id)
            self.output_projection = Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.src_positions = input_positions(cfg)
        # learned positions are a table per side; the sinusoids' one table (no weights) serves both
        self.tgt_positions = input_positions(cfg) if cfg.positional == "learned" else self.src_positions
        self.encoder_position_bias = self.decoder_position_bias = None
        if cfg.positional == "relative":  # the learned tables of T5's bias, one per stack
            self.encoder_position_bias = RelativePositionBias(cfg.heads, cfg.relative_buckets,
                                                              cfg.relative_max_distance, bidirectional=True)
            self.decoder_position_bias = RelativePositionBias(cfg.heads, cfg.relative_buckets,
                                                              cfg.relative_max_distance, bidirectional=False)
        self.parameter_free_scheme, _ = score_schemes(cfg)  # RoPE's or ALiBi's rule, for both stacks
        # a bias on the output logits (Marian's final_logits_bias), saved with the weights; None when unused
        self.register_buffer("output_bias", torch.zeros(cfg.vocab_size) if cfg.output_bias else None)
        # ids the model never outputs (their logits are -inf), a buffer so it follows the model's device
        self.register_buffer("never_emitted", torch.tensor(cfg.never_emitted, dtype=torch.long)
                             if cfg.never_emitted else None, persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        pre, embedded = cfg.norm == "pre", cfg.embedding_norm
        self.encoder_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if pre else None
        self.decoder_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if pre else None
        self.encoder_embedding_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if embedded else None
        self.decoder_embedding_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if embedded else None
        self.reset_parameters()

    def score_scheme(self, side: str) -> Rotary | ALiBi | RelativePositionBias | None:
        """What puts position into the scores of that side's self-attention ("source" or "target"); None where
        position is added to the input."""
        if self.parameter_free_scheme is not None:
            return self.parameter_free_scheme
        return self.encoder_position_bias if side == "source" else self.decoder_position_bias

    @property
    def adds_score_bias(self) -> bool:
        """Whether position enters the self-attention scores as an added bias (ALiBi, T5's relative bias)."""
        scheme = self.score_scheme("source")
        return scheme is not None and scheme.adds_bias

    def score_position(self, side: str, queries: Tensor, keys: Tensor, need_weights: bool) -> ScorePosition | None:
        """How position enters one call's self-attention scores on that side, for the new tokens at `queries`
        ``(batch, len)`` and every key at `keys` ``(batch, keys)``; None for the input schemes."""
        scheme = self.score_scheme(side)
        return None if scheme is None else scheme.score_position(queries, keys, need_weights)

    @classmethod
    def for_loading(cls, cfg: ModelConfig) -> Transformer:
        """The model with uninitialised weights (built on the meta device, then given CPU storage) and its fixed
        buffers computed (the sinusoid table, the never-emitted ids): what a weights file fills, without first
        drawing random weights that the load overwrites."""
        with torch.device("meta"):
            model = cls(cfg)
        model = with_cpu_storage(model)
        if model.never_emitted is not None:
            with torch.no_grad():
                model.never_emitted.copy_(torch.tensor(cfg.never_emitted, dtype=torch.long))
        return model

    def reset_parameters(self) -> None:
        """Xavier-uniform matrices, zero biases, embeddings N(0, d_model^-0.5) (so scaled ones have unit variance)."""
        for name, p in self.named_parameters():
            if "embedding" in name:
                if not p.is_meta:  # see normal_embedding
                    nn.init.normal_(p, std=self.config.d_model ** -0.5)
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        with torch.no_grad():
            self.src_embedding.weight[self.config.pad_id].zero_()
            self.tgt_embedding.weight[self.config.pad_id].zero_()

    # --- embeddings --------------------------------------------------------------------------------
    def _check_ids(self, ids: Tensor, name: str) -> None:
        if ids.dim() != 2:
            raise ValueError(f"{name} must be (batch, seq_len) token ids, got shape {tuple(ids.shape)}")
        if ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"{name} must be integer token ids, got {ids.dtype}")

    def embed(self, ids: Tensor, side: str, offset: int = 0, positions: bool = True,
              tokens: Tensor | None = None, position_ids: Tensor | None = None) -> Tensor:
        """``Dropout(Embedding(ids) * sqrt(d_model) + PE)`` for the "source" or "target" side (without the scale
        where ``scale_embeddings`` is off; the sum normed first where ``embedding_norm`` is on).

        ``positions=False`` leaves the PE out (an experiment: the model then sees a bag of tokens); the module
        is not changed, so other callers of the same model are unaffected. `tokens` ``(batch, len, d_model)``
        replaces ``Embedding(ids) * sqrt(d_model)`` (gradient attributions take gradients with respect to it).
        `position_ids` ``(batch, len)``: each token's position in place of ``offset, offset+1, ..`` (a source with
        some tokens left out keeps the others' positions).
        """
        if tokens is None:
            x = self.token_embeddings(ids, side)
        elif tokens.shape != (*ids.shape, self.config.d_model):
            expected = (*ids.shape, self.config.d_model)
            raise ValueError(f"{side} token embeddings must be (batch, len, d_model) = {expected}, got "
                             f"{tuple(tokens.shape)}")
        else:
            x = tokens
        encodings = self.src_positions if side == "source" else self.tgt_positions
        if encodings is None:  # position enters the scores, not the input
            check_positions(ids.shape[1] if position_ids is None else int(position_ids.max()) + 1, offset,
                            self.config.max_positions)
        elif positions and position_ids is None:
            x = x + encodings(ids.shape[1], offset)
        elif positions:
            if position_ids.shape != ids.shape:
                raise ValueError(f"position_ids of shape {tuple(position_ids.shape)} differ from the {side} ids' "
                                 f"{tuple(ids.shape)}")
            x = x + encodings(int(position_ids.max()) + 1)[position_ids]
        norm = self.encoder_embedding_norm if side == "source" else self.decoder_embedding_norm
        x = x if norm is None else normed(norm, x)
        return self.dropout(x) if self.training else x

    def token_embeddings(self, ids: Tensor, side: str) -> Tensor:
        """``Embedding(ids) * sqrt(d_model)`` of the "source" or "target" side: ``(batch, len, d_model)``; not
        scaled where the config's ``scale_embeddings`` is off (T5, BART)."""
        table = self.src_embedding if side == "source" else self.tgt_embedding
        return table(ids) * math.sqrt(self.config.d_model) if self.config.scale_embeddings else table(ids)

    def attention_block(self, kind: str, layer: int) -> tuple[MultiHeadAttention, Residual]:
        """The attention module of one layer and kind and the residual connection (with its LayerNorm) around it:
        the parameters contribution methods (ALTI) need beside a layer's `AttentionRecord`."""
        check_kind(kind)
        layers = self.encoder_layers if kind == "encoder" else self.decoder_layers
        check_int("layer", layer, 0, len(layers) - 1, error=ValueError,
                  message=f"{kind} layer must be an integer from 0 to {len(layers) - 1}, got {layer!r}")
        block = layers[layer]
        if kind == "encoder":
            return block.self_attn, block.attn_residual
        if kind == "decoder":
            return block.self_attn, block.self_residual
        return block.cross_attn, block.cross_residual

    def positional_encodings(self, length: int, side: str = "source", offset: int = 0) -> Tensor:
        """The ``(length, d_model)`` positional encodings the model adds on that side: zeros where position enters
        the scores instead (RoPE, ALiBi, relative)."""
        encodings = self.src_positions if side == "source" else self.tgt_positions
        if encodings is None:
            check_positions(length, offset, self.config.max_positions)
            return self.src_embedding.weight.new_zeros(length, self.config.d_model)
        return encodings(length, offset)

    # --- the two stacks ------------------------------------------------------------------------------
    def encode(self, src: Tensor, need_weights: bool = False, head_mask: HeadMask | None = None,
               positions: bool = True, token_embeddings: Tensor | None = None,
               position_ids: Tensor | None = None) -> EncoderOutput:
        """Run the encoder over ``src`` ``(batch, src_len)`` token ids (``positions=False``: without the PE;
        `token_embeddings`: in place of the ids' scaled embeddings; `position_ids`: the tokens' positions; see
        `embed`)."""
        self._check_ids(src, "src")
        mask = padding_mask(src, self.config.pad_id)
        has_padding = bool((~mask).any())
        attend = mask if has_padding else None
        x = self.embed(src, "source", positions=positions, tokens=token_embeddings, position_ids=position_ids)
        where = _positions(src, 0, position_ids)
        position = self.score_position("source", where, where, need_weights) if positions else None
        records = []
        for i, layer in enumerate(self.encoder_layers):
            x, record = layer(x, attend, need_weights, head_mask.layer("encoder", i) if head_mask else None,
                              position)
            if record is not None:
                records.append(record)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return EncoderOutput(x, mask, records, has_padding)

    def decode(self, tgt: Tensor, encoded: EncoderOutput, need_weights: bool = False,
               cache: list[LayerCache] | None = None, offset: int = 0, tgt_mask: Tensor | None = None,
               head_mask: HeadMask | None = None, positions: bool = True,
               token_embeddings: Tensor | None = None, position_ids: Tensor | None = None,
               states: bool = False) -> DecoderOutput:
        """Run the decoder over ``tgt`` ``(batch, tgt_len)`` (positions ``offset..``) attending to `encoded`.

        Pass the `cache` returned by the previous call to decode one step at a time (O(length) per step).
        ``positions=False`` leaves the positional encodings out. `position_ids` ``(batch, tgt_len)`` gives each
        token its own position (a tree of prefixes decoded at once: each node at its depth, `tgt_mask` letting it
        see its ancestors only). `states`: the residual stream entering layer 0 and leaving each layer (``states``).
        """
        self._check_ids(tgt, "tgt")
        if tgt.shape[0] != encoded.hidden.shape[0]:
            raise ValueError(f"tgt batch ({tgt.shape[0]}) differs from source batch ({encoded.hidden.shape[0]})")
        # one new query per step sees every cached key: the causal mask is all True then, so it is left out
        causal = None if cache is not None and tgt.shape[1] == 1 else causal_mask(tgt.shape[1], tgt.device, offset)
        self_mask = combine_masks(causal, tgt_mask)
        x = self.embed(tgt, "target", offset, positions, token_embeddings, position_ids)
        position = None
        if positions and self.score_scheme("target") is not None:
            where = _positions(tgt, offset, position_ids)
            earlier = cache[0].self_attn.positions if cache else None
            keys = where if earlier is None else torch.cat([earlier, where], dim=1)
            position = self.score_position("target", where, keys, need_weights)
        out = DecoderOutput(x, states=[x] if states else [])
        for i, layer in enumerate(self.decoder_layers):
            masks = (head_mask.layer("decoder", i), head_mask.layer("cross", i)) if head_mask else (None, None)
            x, self_record, cross_record, layer_cache = layer(
                x, encoded.hidden, self_mask, encoded.attention_mask, need_weights,
                cache[i] if cache is not None else None, masks, position)
            out.cache.append(layer_cache)
            if states:
                out.states.append(x)
            if self_record is not None and cross_record is not None:
                out.self_records.append(self_record)
                out.cross_records.append(cross_record)
        out.hidden = self.decoder_norm(x) if self.decoder_norm is not None else x
        return out

    def unembed(self, stream: Tensor) -> Tensor:
        """The logits of decoder residual-stream states: the decoder's final norm (a pre-norm decoder's), then
        `logits`."""
        return self.logits(stream if self.decoder_norm is None else self.decoder_norm(stream))

    def logits(self, hidden: Tensor, mask_never_emitted: bool = True) -> Tensor:
        """Pre-softmax scores over the vocabulary (tied to the embeddings when shared), plus the output bias of an
        imported model; the ids it never outputs (config ``never_emitted``) score -inf unless `mask_never_emitted`
        is False (transformers' search bans them after its log-softmax instead, through its bad words). With the
        config's ``head_rescale`` (T5 v1.0) `hidden` is multiplied by d_model^-0.5 first."""
        if self.config.head_rescale:
            hidden = hidden * self.config.d_model ** -0.5
        if self.output_projection is None:
            scores = linear(hidden, self.tgt_embedding.weight)
        else:
            scores = self.output_projection(hidden)
        if self.output_bias is not None:
            scores = scores + self.output_bias
        return self.mask_never_emitted(scores) if mask_never_emitted else scores

    def mask_never_emitted(self, scores: Tensor) -> Tensor:
        """`scores` over the vocabulary with the ids this model never outputs (config ``never_emitted``) at -inf."""
        return scores if self.never_emitted is None else scores.index_fill(-1, self.never_emitted, float("-inf"))

    def forward(self, src: Tensor, tgt: Tensor, need_weights: bool = False,
                head_mask: HeadMask | None = None, positions: bool = True,
                encoded: EncoderOutput | None = None, source_embeddings: Tensor | None = None,
                target_embeddings: Tensor | None = None, raw_logits: Tensor | None = None) -> Seq2SeqOutput:
        """Teacher-forced pass: `tgt` is the decoder input (``<s> y1 .. y_{n-1}``); ``positions=False``: no PE.

        `encoded`: this `src` already encoded with the same settings (`encode` with `need_weights` etc.), to save
        running the encoder twice. `source_embeddings` / `target_embeddings`: in place of the ids' scaled token
        embeddings (see `embed`). `raw_logits`: ``(batch, tgt_len, vocab)`` this pass's logits as
        ``logits(..., mask_never_emitted=False)`` gives them, where the caller holds them already (a verified
        search's): the output projection is not run again."""
        if raw_logits is not None and raw_logits.shape != (*tgt.shape, self.config.vocab_size):
            raise ValueError(f"raw_logits must be (batch, tgt_len, vocab) = {(*tgt.shape, self.config.vocab_size)}, "
                             f"got {tuple(raw_logits.shape)}")
        encoded, decoded, tgt_pad = self.teacher_forced(src, tgt, need_weights, head_mask, positions, encoded,
                                                        source_embeddings, target_embeddings)
        logits = self.logits(decoded.hidden) if raw_logits is None else self.mask_never_emitted(raw_logits)
        return Seq2SeqOutput(logits, encoded.records, decoded.self_records,
                             decoded.cross_records, encoded.mask,
                             combine_masks(causal_mask(tgt.shape[1], tgt.device), tgt_pad))

    def teacher_forced(self, src: Tensor, tgt: Tensor, need_weights: bool = False,
                       head_mask: HeadMask | None = None, positions: bool = True,
                       encoded: EncoderOutput | None = None, source_embeddings: Tensor | None = None,
                       target_embeddings: Tensor | None = None) -> tuple[EncoderOutput, DecoderOutput, Tensor]:
        """`forward` up to the decoder's output states (before the logits): the encoder's and the decoder's
        outputs and the target padding mask (gradient attributions start from the states)."""
        if encoded is None:
            encoded = self.encode(src, need_weights, head_mask, positions, source_embeddings)
        elif encoded.hidden.shape[:2] != src.shape:
            raise ValueError(f"encoded is of a source of shape {tuple(encoded.hidden.shape[:2])}, src is "
                             f"{tuple(src.shape)}")
        tgt_pad = padding_mask(tgt, self.config.pad_id)
        if self.config.bos_id == self.config.pad_id:  # Marian starts from the pad id: position 0 is no padding
            tgt_pad[..., 0] = True
        decoded = self.decode(tgt, encoded, need_weights, tgt_mask=tgt_pad, head_mask=head_mask, positions=positions,
                              token_embeddings=target_embeddings)
        return encoded, decoded, tgt_pad

    def num_parameters(self) -> int:
        """Distinct trainable parameters (tied matrices counted once)."""
        return sum(p.numel() for p in self.parameters())
