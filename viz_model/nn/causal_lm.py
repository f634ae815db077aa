"""The decoder-only language model (GPT-2, Llama, Mistral, Qwen2, Gemma, BLOOM, GPT-NeoX, GPT-Neo, OPT, Phi, OLMo 2,
Mixtral, gpt-oss), instrumented as the translator is.

One stack of layers, each causal self-attention then a feed-forward network (or both side by side: parallel
residual), a final norm and the pre-softmax projection (tied to the embeddings or its own). It is built from the
translator's blocks (`MultiHeadAttention` with grouped key/value heads, `FeedForward`, `Residual`, the position
schemes); what the families differ in are settings of `ModelConfig` (kind "decoder"). Every forward can return each
layer's `AttentionRecord` (and, in a mixture of experts, where it routed each token); nothing is stored on a module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn

from ..config import ModelConfig
from ..config.model import DECODER_POSITIONS
from .attention import AttentionRecord, KVCache, MultiHeadAttention
from .clamped_experts import ClampedExperts
from .experts import ExpertRouting, Mixture, MixtureOfExperts, routed
from .head_patch import HeadPatch, LayerPatch
from .linear import Linear, linear
from .model import FeedForward, Residual, _attention, _feed_forward, _residual, _with_stream, with_cpu_storage
from .norms import make_norm, normed
from .position_setup import input_positions, score_schemes
from .positional import normal_embedding
from .score_position import ScorePosition
from .score_recipe import ScoreRecipe, laid_out


class CausalLayer(nn.Module):
    """Self-attention, masked and cached as it decodes, then the feed-forward network: the encoder layer's
    sub-layers (`ModelConfig.attention_only`: the self-attention alone, ``ffn`` and ``ffn_residual`` None); with
    `ModelConfig.parallel_residual` both read the layer's input and add to it."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.parallel = cfg.parallel_residual
        self.self_attn = _attention(cfg)
        self.ffn: FeedForward | Mixture | None = _feed_forward(cfg) if not cfg.experts else _experts(cfg)
        self.attn_residual = _residual(cfg)
        self.ffn_residual: Residual | None = _residual(cfg)
        if cfg.attention_only:  # built, then dropped: a seed draws the same initial weights as it always did
            self.ffn = self.ffn_residual = None

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool,
                cache: KVCache | None = None, position: ScorePosition | None = None,
                head_mask: Tensor | None = None, head_patch: LayerPatch | None = None, causal: bool = False
                ) -> tuple[Tensor, AttentionRecord | None, KVCache, ExpertRouting | None]:
        """The layer's output, its self-attention's record (with `need_weights`), its keys and values so far and,
        with `need_weights` and a mixture of experts, where it routed each token (`head_patch`: heads whose outputs
        come from another run; `causal`: `mask` is the plain causal mask of a pass from position 0)."""
        h = self.attn_residual.enter(x)
        out, record, kv = self.self_attn(h, None, mask, need_weights=need_weights, head_mask=head_mask, cache=cache,
                                         append_to_cache=True, position=position, head_patch=head_patch,
                                         causal=causal)
        y = self.attn_residual.leave(x, out)
        if self.ffn is None:  # attention-only
            return y, _with_stream(record, x, y), kv, None
        entering = self.ffn_residual.enter(x if self.parallel else y)  # GPT-NeoX, Phi: x + attn(norm1 x) + ffn(norm2 x)
        ffn_out, routing = routed(self.ffn, entering) if need_weights else (self.ffn(entering), None)
        return self.ffn_residual.leave(y, ffn_out), _with_stream(record, x, y), kv, routing


@dataclass
class CausalLMOutput:
    """What one `CausalLM` call computed.

    :ivar logits: ``(batch, len, vocab)`` the scores of each next token
    :ivar records: per layer, the self-attention's `AttentionRecord` (with ``need_weights``)
    :ivar cache: per layer, the keys and values so far (what the next call continues from)
    :ivar mask: the self-attention mask of the last layer, True = may attend (None: every key visible)
    :ivar maps: per layer, the attention weights alone (with ``need_weights="maps"``: no records kept)
    :ivar recipes: per layer, what its scores need (with ``need_weights="recipe"``: no maps made)
    :ivar states: with ``states=True``, the residual stream entering block 0 (the embeddings and what the model adds
        to them) and leaving each block, ``(batch, len, d_model)`` each (the logit lens reads them)
    :ivar sinks: per layer, ``(heads,)`` float32 the learned sink logits its softmax saw (with ``need_weights``, in a
        model with learned sinks: gpt-oss)
    :ivar routing: per layer, where its mixture of experts sent each token (with ``need_weights``, in a mixture)
    """

    logits: Tensor
    records: list[AttentionRecord] = field(default_factory=list)
    cache: list[KVCache] = field(default_factory=list)
    mask: Tensor | None = None
    maps: list[Tensor] = field(default_factory=list)
    recipes: list[ScoreRecipe] = field(default_factory=list)
    states: list[Tensor] = field(default_factory=list)
    sinks: list[Tensor] = field(default_factory=list)
    routing: list[ExpertRouting] = field(default_factory=list)

    @property
    def attentions(self) -> list[Tensor]:
        """Per layer ``(batch, heads, len, keys)``."""
        return [record.weights for record in self.records] or self.maps


def _experts(cfg: ModelConfig) -> Mixture:
    """The mixture of experts `cfg` names: gpt-oss's clamped experts where it sets ``expert_limit``, else Mixtral's."""
    if cfg.expert_limit is not None:
        return ClampedExperts(cfg.d_model, cfg.d_ff, cfg.experts, cfg.experts_per_token, cfg.expert_limit,
                              cfg.expert_alpha)
    return MixtureOfExperts(cfg.d_model, cfg.d_ff, cfg.experts, cfg.experts_per_token, cfg.activation)


def window_mask(length: int, offset: int, window: int | None, device: torch.device) -> Tensor:
    """``(1, 1, length, offset + length)``: query ``offset + i`` may attend key j iff ``j <= offset + i`` and, with
    a `window`, ``j > offset + i - window`` (the last `window` keys, itself included)."""
    q = torch.arange(offset, offset + length, device=device)[:, None]
    k = torch.arange(offset + length, device=device)[None, :]
    visible = k <= q
    if window is not None:
        visible = visible & (k > q - window)
    return visible[None, None]


def plain_causal(length: int, offset: int, window: int | None, key_mask: Tensor | None) -> bool:
    """Whether `window_mask` of a pass of `length` tokens after `offset` (with `key_mask`) is the plain causal mask
    of as many queries as keys: no earlier keys, no extra key mask, no window shorter than the pass."""
    return offset == 0 and length > 1 and key_mask is None and (window is None or window >= length)


def with_key_mask(mask: Tensor, key_mask: Tensor, offset: int, layer: int) -> Tensor:
    """`mask` ``(1, 1, len, keys)`` and `key_mask` (``(len, keys)`` or 4D, True = may attend) together; one line
    naming the first query (0-based position) they leave with no key to attend to."""
    if key_mask.dtype != torch.bool or key_mask.dim() not in (2, 4) or key_mask.shape[-2:] != mask.shape[-2:]:
        raise ValueError(f"key_mask must be a bool tensor of shape (queries={mask.shape[-2]}, keys={mask.shape[-1]}) "
                         f"or 4D ending so, got {key_mask.dtype} {tuple(key_mask.shape)}")
    extra = key_mask.to(mask.device)
    joined = mask & (extra if extra.dim() == 4 else extra[None, None])
    empty = ~joined.any(-1)
    if bool(empty.any()):
        query = offset + int(empty.nonzero()[0, -1])
        raise ValueError(f"key_mask leaves query {query} (0-based position) with no key to attend to in layer "
                         f"{layer}: keep at least one key it can see")
    return joined


class CausalLM(nn.Module):
    """A decoder-only Transformer language model.

    :ivar config: its `ModelConfig` (kind "decoder")
    :ivar embedding: the token embeddings (the output projection too where the head is tied)
    :ivar project_in: the embeddings' projection to d_model where they are narrower (OPT's), else None
    :ivar project_out: the last hidden state's projection back to the embeddings' width, before the head, else None
    :ivar positions: the learned or sinusoidal positions added to the input, else None (RoPE, ALiBi)
    :ivar embedding_norm: the norm on the embeddings (BLOOM's word_embeddings_layernorm), else None
    :ivar dropout: on the embeddings while training (the sub-layers' own is in each `Residual`)
    :ivar layers: the `CausalLayer` stack
    :ivar final_norm: the norm after the last layer (None: OPT's post-norm models have none)
    :ivar lm_head: the output projection where it has its own matrix (and its bias: Phi's), else None
    :ivar scheme: what puts position into the scores (`Rotary`, `ALiBi`), else None
    :ivar local_scheme: the sliding layers' own RoPE (Gemma 3's local base), else None
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.kind != "decoder":
            raise ValueError(f"CausalLM builds a decoder-only model (config kind 'decoder'), got kind {cfg.kind!r}")
        if cfg.positional not in DECODER_POSITIONS:
            raise ValueError(f"a decoder-only model takes positions {', '.join(DECODER_POSITIONS)}; got "
                             f"{cfg.positional!r}")
        self.config = cfg
        width = cfg.d_model if cfg.embedding_size is None else cfg.embedding_size
        self.embedding = normal_embedding(cfg.vocab_size, width, cfg.d_model ** -0.5)
        self.project_in = None if cfg.embedding_size is None else Linear(width, cfg.d_model, bias=False)
        self.project_out = None if cfg.embedding_size is None else Linear(cfg.d_model, width, bias=False)
        self.positions = input_positions(cfg)
        self.embedding_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if cfg.embedding_norm else None
        self.dropout = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(CausalLayer(cfg) for _ in range(cfg.decoder_layers))
        self.final_norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps) if cfg.final_norm else None
        self.lm_head = None if cfg.tied_head else Linear(width, cfg.vocab_size, bias=cfg.head_bias)
        self.scheme, self.local_scheme = score_schemes(cfg)
        self.reset_parameters()

    @classmethod
    def for_loading(cls, cfg: ModelConfig) -> CausalLM:
        """The model with uninitialised weights (built on the meta device, then given CPU storage): what a weights
        file fills."""
        with torch.device("meta"):
            model = cls(cfg)
        return with_cpu_storage(model)

    def reset_parameters(self) -> None:
        """Normal(0, 0.02) matrices and embeddings (GPT-2's), zero biases; norms keep their gains of one."""
        for name, p in self.named_parameters():
            if p.is_meta:
                continue
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def window(self, layer: int) -> int | None:
        """The sliding window of `layer`, None where it sees every earlier key."""
        cfg = self.config
        sliding = cfg.sliding_window is not None and (cfg.sliding_layers is None or layer in cfg.sliding_layers)
        return cfg.sliding_window if sliding else None

    @property
    def one_token_per_pass(self) -> bool:
        """Whether a pass's rotation depends on how long the sequence has grown (dynamic NTK RoPE): a continuation
        then equals ``generate``'s only when each new token runs in a pass of its own, as there."""
        return bool(getattr(self.scheme, "grows_with_length", False))

    def token_embeddings(self, ids: Tensor) -> Tensor:
        """``(batch, len, d_model)`` the ids' embeddings, times sqrt(d_model) where the config scales them (projected
        to d_model where they are narrower: OPT's project_in)."""
        x = self.embedding(ids)
        if self.config.scale_embeddings:  # the factor in the embeddings' dtype, as Gemma rounds it
            x = x * torch.tensor(math.sqrt(self.config.d_model), dtype=x.dtype, device=x.device)
        return x if self.project_in is None else self.project_in(x)

    def embed(self, ids: Tensor, offset: int = 0, tokens: Tensor | None = None) -> Tensor:
        """`token_embeddings` (or `tokens` in their place) plus the input positions, normed where the config says
        (``embedding_norm``); dropout while training."""
        x = self.token_embeddings(ids) if tokens is None else tokens
        if self.positions is not None:  # a table: nothing past its last row (RoPE and ALiBi run on)
            x = x + self.positions(ids.shape[1], offset)
        x = x if self.embedding_norm is None else normed(self.embedding_norm, x)
        return self.dropout(x) if self.training else x

    def forward(self, ids: Tensor, need_weights: bool | str = False, cache: list[KVCache] | None = None,
                head_mask: Tensor | None = None, token_embeddings: Tensor | None = None,
                last_logits: bool = False, key_mask: Tensor | None = None,
                maps_into: list[Tensor] | None = None, states: bool = False,
                head_patch: HeadPatch | None = None) -> CausalLMOutput:
        """Run `ids` ``(batch, len)`` after the tokens of `cache` (the previous call's, or None: from position 0).
        `need_weights`: True, each layer's record; "maps", its weights alone (``maps``: a trace's memory, no
        positional part computed). `head_mask` ``(layers, heads)``: multipliers of each head's output (0 switches it
        off); `token_embeddings` ``(batch, len, d_model)``: in place of the ids' own (gradients, integrated
        gradients' path); `last_logits`: the last position's logits alone (what a search step reads); `key_mask`
        ``(len, offset + len)`` or 4D, True = may attend: keys hidden beyond each layer's causal (and window) mask;
        "recipe": each layer's `ScoreRecipe` (``recipes``), no maps made; `maps_into`: with "maps", per layer a tensor
        of its weights' shape that they are copied into and returned as (views of one block allocated beforehand: no
        layer's maps left among the freed scores of the next, `maps_block`); `states`: the residual stream before
        block 0 and after each block (``states``); `head_patch`: per batch row, the heads whose outputs (before each
        layer's output projection) come from another run over as many tokens (activation patching; from its `start`
        layer on, ``cache`` holding those layers alone)."""
        if need_weights not in (False, True, "maps", "recipe"):
            raise ValueError(f"need_weights must be False, True, 'maps' or 'recipe', got {need_weights!r}")
        recipe = need_weights == "recipe"  # each layer's `ScoreRecipe` (batch of one), no maps
        if recipe and key_mask is not None:
            raise ValueError("need_weights='recipe' records no key_mask (a per-query mask): use True or 'maps'")
        maps_only, need_weights = need_weights in ("maps", "recipe"), bool(need_weights)
        if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"ids must be (batch, len) integer token ids, got {ids.dtype} {tuple(ids.shape)}")
        offset = 0 if not cache else cache[0].key.shape[2]
        first = 0 if head_patch is None else head_patch.start
        x = self.embed(ids, offset, token_embeddings) if not first else head_patch.stream.expand(ids.shape[0], -1, -1)
        position = local = None
        if self.scheme is not None:
            where = torch.arange(offset, offset + ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
            keys = where if not cache else torch.cat([cache[0].positions, where], dim=1)
            parts = need_weights and not maps_only  # a record's positional part
            position = self.scheme.score_position(where, keys, parts)
            local = None if self.local_scheme is None else self.local_scheme.score_position(where, keys, parts)
        out = CausalLMOutput(x, states=[x] if states else [])
        masks: dict[int | None, Tensor | None] = {}
        for i, layer in enumerate(self.layers):
            if i < first:  # the patch's rows start from the residual stream entering layer `first`
                continue
            window = self.window(i)
            if window not in masks:
                needed = ids.shape[1] > 1 or (window is not None and offset + 1 > window)
                masks[window] = window_mask(ids.shape[1], offset, window, ids.device) if needed else None
                if key_mask is not None:
                    masks[window] = with_key_mask(window_mask(ids.shape[1], offset, window, ids.device), key_mask,
                                                  offset, i)
            scheme = local if local is not None and window is not None else position
            x, record, kv, routing = layer(x, masks[window], "recipe" if recipe else need_weights,
                                           cache[i] if cache else None, scheme,
                                           None if head_mask is None else head_mask[i],
                                           None if head_patch is None else head_patch.layer(i),
                                           plain_causal(ids.shape[1], offset, window, key_mask))
            out.cache.append(kv)
            if states:
                out.states.append(x)
            if record is not None and record.sinks is not None:
                out.sinks.append(record.sinks.detach().float().cpu())
            if routing is not None:
                out.routing.append(routing)
            if recipe:
                out.recipes.append(laid_out(record, causal=True, window=window, scheme=self.scheme))
            elif record is not None:
                out.maps.append(record.weights if maps_into is None else maps_into[i].copy_(record.weights)) \
                    if maps_only else out.records.append(record)
            record = None  # with "maps", its scores go before the next layer's are made
            out.mask = masks[window]
        out.logits = self.unembed(x[:, -1:] if last_logits else x)
        return out

    def unembed(self, stream: Tensor) -> Tensor:
        """The logits of residual-stream states: the final norm (where the model has one), then `logits`."""
        return self.logits(stream if self.final_norm is None else normed(self.final_norm, stream))

    def logits(self, hidden: Tensor) -> Tensor:
        """Pre-softmax scores over the vocabulary of the normed last hidden states (projected back to the
        embeddings' width first where the model has `project_out`; soft-capped where the config caps them:
        Gemma 2)."""
        hidden = hidden if self.project_out is None else self.project_out(hidden)
        logits = self.lm_head(hidden) if self.lm_head is not None else linear(hidden, self.embedding.weight)
        cap = self.config.logit_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def attention_block(self, layer: int) -> tuple[MultiHeadAttention, nn.Module]:
        """The attention module of one layer and the residual connection around it."""
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(self.layers):
            raise ValueError(f"layer must be an integer from 0 to {len(self.layers) - 1}, got {layer!r}")
        return self.layers[layer].self_attn, self.layers[layer].attn_residual

    def num_parameters(self) -> int:
        """Distinct trainable parameters (tied matrices counted once)."""
        return sum(p.numel() for p in self.parameters())


def maps_block(network: CausalLM, batch: int, rows: int, keys: int) -> list[Tensor]:
    """Per layer a ``(batch, heads, rows, keys)`` float32 CPU tensor for `CausalLM.forward`'s `maps_into`: views of one
    numpy block (a long prompt's is larger than malloc's largest heap block, so it comes from the system and goes
    back whole; the maps of each layer kept in the heap beside the freed scores of the others hold far more)."""
    shape = (len(network.layers), batch, network.layers[0].self_attn.heads, rows, keys)
    return list(torch.from_numpy(np.empty(shape, dtype=np.float32)).unbind(0))
