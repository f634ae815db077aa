"""`ModelConfig`: the network, saved inside every model directory (``config.json``); the only place its defaults
live."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import ConfigError, _check_bool, _check_choice, _check_float, check_int, from_dict

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope", "alibi", "relative")
INPUT_POSITIONS = ("sinusoidal", "learned")  # added to the input; the other schemes put position into the scores
SINUSOID_LAYOUTS = ("interleaved", "halves")  # sin/cos in alternate dimensions (the paper) or in two halves (Marian)
SINUSOID_FREQUENCIES = ("paper", "fairseq")  # 10000^(-2i/d_model), or exp(-i ln(10000) / (d_model/2 - 1)) (M2M100)
ACTIVATIONS = ("relu", "silu", "gelu", "gelu_new")  # gelu_new: GELU's tanh approximation (T5 v1.1's gated GELU)
NORM_KINDS = ("post", "pre")
NORMALIZATIONS = ("layer", "rms", "gemma")  # LayerNorm, T5's RMS norm (no mean, no bias), Gemma's (gain 1 + w)
IMPORT_OPTIONS = ("sinusoid_layout", "sinusoid_frequencies", "position_offset", "activation", "output_bias", "bos_id",
                  "eos_id", "unk_id", "never_emitted", "forced_first_id", "eos_at_limit", "normalization", "norm_eps",
                  "scale_embeddings", "embedding_norm", "d_kv", "scale_scores", "attention_bias", "ffn_bias",
                  "gated_ffn", "tied_head", "head_rescale")
SCHEME_OPTIONS = ("rope_base", "alibi_max_bias", "relative_buckets", "relative_max_distance")
MODEL_KINDS = ("seq2seq", "decoder", "encoder")  # the paper's encoder-decoder, a decoder-only language model (GPT-2,
# Llama), or an encoder-only masked language model (BERT)
ROPE_SCALINGS = ("default", "linear", "llama3", "yarn", "dynamic")  # transformers' rope_type values implemented here
DECODER_OPTIONS = ("kind", "kv_heads", "qkv_bias", "rope_scaling", "rope_factor", "rope_low_freq_factor",
                   "rope_high_freq_factor", "rope_original_max_positions", "rope_beta_fast", "rope_beta_slow",
                   "rope_truncate", "rope_attention_factor", "rope_mscale", "rope_mscale_all_dim",
                   "sliding_window", "sliding_layers",
                   "qk_norm", "query_scalar", "attention_softcap", "logit_softcap", "sandwich_norm", "local_rope_base",
                   "attention_only", "rope_dims", "parallel_residual", "final_norm", "input_norm", "joint_qk_norm",
                   "head_bias", "experts", "experts_per_token", "expert_limit", "expert_alpha", "learned_sinks")
SEQ2SEQ_OPTIONS = {"share_embeddings": True, "output_bias": False, "never_emitted": (), "forced_first_id": None,
                   "eos_at_limit": False, "head_rescale": False}  # what only the translator reads: their defaults
DECODER_POSITIONS = ("learned", "sinusoidal", "rope", "alibi")  # a decoder-only model has no relative bias
ENCODER_OPTIONS = ("type_vocab_size", "embedding_size", "head_activation", "pad_positions", "shared_layers",
                   "window_radius", "windowed_layers", "windowed_rope_base", "first_attn_norm", "project_before_norm",
                   "position_biased_input", "position_buckets", "max_relative_positions", "share_att_key",
                   "pos_att_type", "relative_norm", "conv_kernel_size", "conv_groups", "conv_activation",
                   "masked_lm_head")
"""What only the encoder-only kind reads (BERT's token types, ALBERT's and ELECTRA's narrower embeddings, the masked-LM
head's activation, RoBERTa's positions counted from its pad id, ALBERT's layers sharing weights, ModernBERT's local
layers and their RoPE base, DeBERTa's disentangled attention, a folder without the masked-LM head)."""
ENCODER_POSITIONS = ("learned", "rope", "disentangled")  # BERT's table, ModernBERT's RoPE, DeBERTa's relative terms
DISENTANGLED_TERMS = ("c2p", "p2c")  # DeBERTa's content-to-position and position-to-content terms
SOFTCAP_RANGE = (1.0, 1e4)
ROPE_FACTOR_RANGE = (1.0, 1024.0)
YARN_BETA_RANGE = (1e-3, 1e4)  # yarn's beta_fast / beta_slow and its attention factor
ROPE_BASE_RANGE = (2.0, 1e9)
ALIBI_MAX_BIAS_RANGE = (0.5, 64.0)
RELATIVE_BUCKETS_RANGE = (4, 1024)
MAX_RELATIVE_DISTANCE = 65_536
MAX_POSITION_OFFSET = 16
NORM_EPS_RANGE = (1e-12, 1e-2)
MAX_CONFIG_BYTES = 1024**2  # a model's config.json is a few hundred bytes: anything huge is damaged or hostile
LIMITS = {"vocab_size": 1_000_000, "d_model": 16_384, "d_ff": 65_536, "heads": 256,
          "encoder_layers": 128, "decoder_layers": 128, "max_positions": 1_048_576}


@dataclass(frozen=True)
class ModelConfig:
    """The encoder-decoder Transformer. Defaults are the paper's base model (Vaswani et al., 2017).

    The options from `sinusoid_layout` on are what imported pretrained models need; each default is this project's
    own choice, and `to_dict` leaves them out where they keep it.

    :ivar vocab_size: pieces in the vocabulary, shared by source and target
    :ivar encoder_layers: N of the encoder stack
    :ivar decoder_layers: N of the decoder stack
    :ivar d_model: the width of every token's vector
    :ivar heads: h, the attention heads of every layer
    :ivar d_ff: the inner width of the feed-forward network
    :ivar dropout: on embeddings and every sub-layer's output, while training
    :ivar attention_dropout: on the attention weights, while training
    :ivar max_positions: the longest source or target, in pieces
    :ivar positional: "sinusoidal" (the paper) or "learned", added to the input; "rope" (queries and keys
        rotated, Llama), "alibi" (a linear distance penalty per head, BLOOM) or "relative" (T5's learned bias per
        head and distance bucket), put into the self-attention scores
    :ivar norm: "post" (``LayerNorm(x + Sublayer(x))``, the paper) or "pre"
    :ivar share_embeddings: one matrix for source and target embeddings and the pre-softmax projection
    :ivar pad_id: the padding piece's id
    :ivar sinusoid_layout: "interleaved" (sin and cos in alternate dimensions, the paper) or "halves" (Marian)
    :ivar sinusoid_frequencies: "paper" (``10000^(-2i/d_model)``) or "fairseq" (M2M100)
    :ivar position_offset: position p reads row p + offset of the position table (M2M100's sinusoids: 2, after its
        pad id; BART's learned table: 2)
    :ivar activation: of the feed-forward network: "relu", "silu", "gelu" or "gelu_new" (GELU's tanh approximation)
    :ivar output_bias: a bias on the output logits (Marian's final_logits_bias)
    :ivar bos_id: the decoder's first input (Marian starts from its pad id)
    :ivar eos_id: the end-of-sentence id
    :ivar unk_id: the unknown piece's id
    :ivar never_emitted: ids whose logits are -inf: the model never outputs them (Marian: pad)
    :ivar forced_first_id: the first output, forced (M2M100: the target language's code); None: not forced
    :ivar eos_at_limit: the last output a length limit allows is forced to be `eos_id` (Hugging Face's
        forced_eos_token_id, which opus-mt's generation configs set), rather than a hypothesis cut off without it
    :ivar normalization: "layer" (LayerNorm), "rms" (T5's: ``x / sqrt(mean(x^2) + eps) * g``, no mean, no bias) or
        "gemma" (the same with the gain ``1 + g``, in float32)
    :ivar norm_eps: the epsilon of every norm (PyTorch's LayerNorm: 1e-5; T5: 1e-6)
    :ivar scale_embeddings: token embeddings are multiplied by sqrt(d_model) (the paper, Marian, mBART; not T5, BART)
    :ivar embedding_norm: a norm on each stack's embeddings, after the positions are added (BART's
        layernorm_embedding)
    :ivar d_kv: the width of one head when it is not d_model / heads (T5's d_kv); None: d_model / heads
    :ivar scale_scores: attention scores are divided by sqrt(d_k) (the paper); T5 leaves them unscaled
    :ivar attention_bias: the Q, K, V and output projections have biases (T5's have none)
    :ivar ffn_bias: the feed-forward layers have biases (T5's have none)
    :ivar gated_ffn: the feed-forward network is ``(act(x W1) * x W3) W2`` (T5 v1.1's gated GELU), not
        ``act(x W1) W2``
    :ivar tied_head: the pre-softmax projection is the shared embedding matrix; False: its own matrix while source
        and target still share theirs (T5 v1.1); only with `share_embeddings`
    :ivar head_rescale: the decoder's output is multiplied by d_model^-0.5 before the projection (T5 v1.0)
    :ivar rope_base: RoPE's base: pair i turns by ``base^(-2i/d_head)`` per position (Llama 2: 10000)
    :ivar alibi_max_bias: ALiBi's slopes are ``2^(-max_bias * h / H)`` (8 in the paper and BLOOM)
    :ivar relative_buckets: the distance buckets of T5's relative bias (T5: 32)
    :ivar relative_max_distance: distances from here on share the last bucket (T5: 128)
    :ivar kind: "seq2seq" (encoder and decoder) or "decoder" (a decoder-only language model: causal self-attention
        only, no encoder (encoder_layers 0), no cross-attention)
    :ivar kv_heads: key/value heads when fewer than `heads` (grouped-query, multi-query attention): query head h
        reads key/value head ``h // (heads / kv_heads)``; None: one per query head
    :ivar qkv_bias: the Q, K, V projections have biases while the output projection follows `attention_bias`
        (Qwen2); None: all four follow `attention_bias`
    :ivar rope_scaling: how RoPE's frequencies are rescaled (transformers' rope_type): "default", "linear" (divided
        by `rope_factor`), "llama3" (Llama 3.1's per-wavelength rule), "yarn" (a ramp over pairs, an attention
        factor) or "dynamic" (NTK: the base grows with the length)
    :ivar rope_factor: the scaling's factor
    :ivar rope_low_freq_factor: llama3's low_freq_factor
    :ivar rope_high_freq_factor: llama3's high_freq_factor
    :ivar rope_original_max_positions: llama3's and yarn's original_max_position_embeddings; dynamic's
        max_position_embeddings (the length past which its base grows)
    :ivar rope_beta_fast: yarn's beta_fast: pairs turning more often within the trained length are kept
    :ivar rope_beta_slow: yarn's beta_slow: pairs turning fewer times are divided by the factor
    :ivar rope_truncate: yarn's truncate: the ramp's ends rounded to whole pairs
    :ivar rope_attention_factor: yarn's attention_factor multiplying cos and sin (None: from the factor)
    :ivar rope_mscale: yarn's mscale (0: unset)
    :ivar rope_mscale_all_dim: yarn's mscale_all_dim (0: unset)
    :ivar sliding_window: each query sees its last `sliding_window` keys (itself included) in the sliding layers
        (Mistral, Qwen2); None: no window
    :ivar sliding_layers: the layers the window applies to; None: every layer
    :ivar qk_norm: each head's queries and keys are normed (the model's `normalization`, over d_head) before RoPE
        (Qwen3, Gemma 3)
    :ivar query_scalar: scores are divided by sqrt(query_scalar) in place of sqrt(d_head) (Gemma 2 / 3's
        query_pre_attn_scalar); None: sqrt(d_head)
    :ivar attention_softcap: scores become ``cap * tanh(scores / cap)`` before the mask (Gemma 2); None: no cap
    :ivar logit_softcap: the logits become ``cap * tanh(logits / cap)`` (Gemma 2); None: no cap
    :ivar sandwich_norm: each sub-layer's output is normed too before it is added back (Gemma 2 / 3's post norms)
    :ivar local_rope_base: the sliding layers' RoPE base (unscaled), the others keep `rope_base` and its scaling
        (Gemma 3); None: one RoPE for every layer
    :ivar attention_only: each layer is self-attention alone, no feed-forward network (the attention-only models
        of Elhage et al. and Olsson et al.; `d_ff` is not read)
    :ivar rope_dims: RoPE turns the first `rope_dims` dimensions of each head, the rest pass unturned (partial rotary:
        GPT-NeoX's rotary_pct, Phi's partial_rotary_factor); None: every dimension
    :ivar parallel_residual: the attention and the feed-forward network both read the layer's input (each through
        its own pre-norm) and both add to it, ``x + attn(norm1 x) + ffn(norm2 x)`` (GPT-NeoX, Phi)
    :ivar final_norm: a norm after the last layer (False: OPT's post-norm models end without one)
    :ivar input_norm: each pre-norm sub-layer norms its input; False: only its output (OLMo 2: ``x + norm(f(x))``,
        with `sandwich_norm`)
    :ivar joint_qk_norm: the query and key norms (`qk_norm`) run over all heads together, before the heads are split
        (OLMo 2), not over each head
    :ivar head_bias: the language model's own output projection has a bias (Phi)
    :ivar experts: the feed-forward network is a mixture of this many gated experts (of width `d_ff`, no biases),
        each token routed to `experts_per_token` of them (Mixtral); 0: one feed-forward network
    :ivar experts_per_token: how many experts each token goes through
    :ivar expert_limit: the experts are gpt-oss's: a router with a bias whose top k logits are softmaxed, experts with
        biases, their gate clamped above and their up projection on both sides at this limit; None: Mixtral's
    :ivar expert_alpha: gpt-oss's experts' gate ``g * sigmoid(alpha * g)``
    :ivar learned_sinks: each head has a learned sink logit: the softmax runs over the keys and it, and the sink's
        share is dropped (gpt-oss: a map's rows sum to less than one)
    :ivar type_vocab_size: the token types (segments) an encoder-only model embeds (BERT: 2; 0: none, DistilBERT)
    :ivar embedding_size: the width of an encoder-only model's embeddings, projected to d_model after the embedding
        norm, the masked-LM head projecting back to it (ELECTRA, ALBERT); a language model's, projected to d_model
        before the positions are added and back before the head (OPT's word_embed_proj_dim); None: d_model
    :ivar head_activation: the activation of the masked-LM head's transform (dense, activation, norm, then the tied
        output projection)
    :ivar pad_positions: positions count the tokens that are not `pad_id`, from ``pad_id + 1`` on (RoBERTa: a pad
        reads row pad_id); False: 0, 1, 2, ...
    :ivar shared_layers: the layers whose weights the `encoder_layers` run share (ALBERT's num_hidden_groups: layer
        i runs stored layer ``int(i / (encoder_layers / shared_layers))``); None: every layer its own
    :ivar window_radius: in the `windowed_layers`, a query sees the keys at most this far on either side
        (ModernBERT's local_attention / 2); None: every layer sees every key
    :ivar windowed_layers: the layers the window applies to (ModernBERT's sliding_attention layers)
    :ivar windowed_rope_base: the windowed layers' RoPE base (ModernBERT's local_rope_theta); the others keep
        `rope_base`
    :ivar first_attn_norm: the first layer's pre-norm attention norms its input; False: it reads the embedding norm's
        output as it is (ModernBERT)
    :ivar project_before_norm: the embeddings are projected to d_model (without a bias) before their norm, not after
        it (DeBERTa's embed_proj)
    :ivar position_biased_input: with "disentangled" positions, a learned table is added to the input too (DeBERTa-v2;
        v3: False)
    :ivar position_buckets: DeBERTa's log-spaced buckets of relative positions (0: one bucket per offset up to
        `max_relative_positions`)
    :ivar max_relative_positions: DeBERTa's largest relative position (its buckets' range)
    :ivar share_att_key: DeBERTa's relative embeddings are projected by the content query and key projections
        (False: by projections of their own)
    :ivar pos_att_type: DeBERTa's position terms: "c2p" (content to position), "p2c" (position to content)
    :ivar relative_norm: DeBERTa's relative embeddings are layer-normed before use (norm_rel_ebd "layer_norm")
    :ivar conv_kernel_size: DeBERTa-v2's convolution over the embeddings, added after the first layer (0: none)
    :ivar conv_groups: its groups of channels
    :ivar conv_activation: its activation: "tanh" or one of the feed-forward network's
    :ivar masked_lm_head: an encoder-only model has its masked-LM head; False: its maps only (imported from a folder
        without the head, such as a sequence classifier's)
    """

    vocab_size: int = 37_000
    encoder_layers: int = 6
    decoder_layers: int = 6
    d_model: int = 512
    heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_positions: int = 256
    positional: str = "sinusoidal"
    norm: str = "post"
    share_embeddings: bool = True
    pad_id: int = 0
    sinusoid_layout: str = "interleaved"
    sinusoid_frequencies: str = "paper"
    position_offset: int = 0
    activation: str = "relu"
    output_bias: bool = False
    bos_id: int = 2
    eos_id: int = 3
    unk_id: int = 1
    never_emitted: tuple[int, ...] = ()
    forced_first_id: int | None = None
    eos_at_limit: bool = False
    normalization: str = "layer"
    norm_eps: float = 1e-5
    scale_embeddings: bool = True
    embedding_norm: bool = False
    d_kv: int | None = None
    scale_scores: bool = True
    attention_bias: bool = True
    ffn_bias: bool = True
    gated_ffn: bool = False
    tied_head: bool = True
    head_rescale: bool = False
    rope_base: float = 10000.0
    alibi_max_bias: float = 8.0
    relative_buckets: int = 32
    relative_max_distance: int = 128
    kind: str = "seq2seq"
    kv_heads: int | None = None
    qkv_bias: bool | None = None
    rope_scaling: str = "default"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_positions: int = 8192
    rope_beta_fast: float = 32.0
    rope_beta_slow: float = 1.0
    rope_truncate: bool = True
    rope_attention_factor: float | None = None
    rope_mscale: float = 0.0
    rope_mscale_all_dim: float = 0.0
    sliding_window: int | None = None
    sliding_layers: tuple[int, ...] | None = None
    qk_norm: bool = False
    query_scalar: float | None = None
    attention_softcap: float | None = None
    logit_softcap: float | None = None
    sandwich_norm: bool = False
    local_rope_base: float | None = None
    attention_only: bool = False
    rope_dims: int | None = None
    parallel_residual: bool = False
    final_norm: bool = True
    input_norm: bool = True
    joint_qk_norm: bool = False
    head_bias: bool = False
    experts: int = 0
    experts_per_token: int = 2
    expert_limit: float | None = None
    expert_alpha: float = 1.702
    learned_sinks: bool = False
    type_vocab_size: int = 0
    embedding_size: int | None = None
    head_activation: str = "gelu"
    pad_positions: bool = False
    shared_layers: int | None = None
    window_radius: int | None = None
    windowed_layers: tuple[int, ...] = ()
    windowed_rope_base: float = 10000.0
    first_attn_norm: bool = True
    project_before_norm: bool = False
    position_biased_input: bool = False
    position_buckets: int = 0
    max_relative_positions: int = 512
    share_att_key: bool = False
    pos_att_type: tuple[str, ...] = ()
    relative_norm: bool = False
    conv_kernel_size: int = 0
    conv_groups: int = 1
    conv_activation: str = "tanh"
    masked_lm_head: bool = True

    def __post_init__(self) -> None:
        _check_choice("kind", self.kind, MODEL_KINDS)
        for name in ("vocab_size", "d_model", "d_ff", "heads", "encoder_layers", "decoder_layers",
                     "max_positions"):
            low = 0 if (name, self.kind) in (("encoder_layers", "decoder"), ("decoder_layers", "encoder")) else 1
            check_int(name, getattr(self, name), low, LIMITS[name])
        check_int("pad_id", self.pad_id, 0, self.vocab_size - 1)
        _check_float("dropout", self.dropout, 0.0, 0.99)
        _check_float("attention_dropout", self.attention_dropout, 0.0, 0.99)
        if self.positional == "disentangled" and self.kind != "encoder":
            raise ConfigError("disentangled positions (DeBERTa's) are of the encoder-only kind (kind = \"encoder\")")
        _check_choice("positional", self.positional,
                      (*POSITIONAL_KINDS, "disentangled") if self.kind == "encoder" else POSITIONAL_KINDS)
        _check_choice("norm", self.norm, NORM_KINDS)
        _check_bool("share_embeddings", self.share_embeddings)
        _check_choice("sinusoid_layout", self.sinusoid_layout, SINUSOID_LAYOUTS)
        _check_choice("sinusoid_frequencies", self.sinusoid_frequencies, SINUSOID_FREQUENCIES)
        check_int("position_offset", self.position_offset, 0, MAX_POSITION_OFFSET)
        if self.position_offset and self.positional not in INPUT_POSITIONS:
            raise ConfigError(f"position_offset needs positions added to the input (sinusoidal or learned), not "
                              f"{self.positional}")
        if self.forced_first_id is not None:
            check_int("forced_first_id", self.forced_first_id, 0, self.vocab_size - 1)
        _check_choice("activation", self.activation, ACTIVATIONS)
        _check_bool("output_bias", self.output_bias)
        _check_bool("eos_at_limit", self.eos_at_limit)
        for name in ("bos_id", "eos_id", "unk_id"):
            check_int(name, getattr(self, name), 0, self.vocab_size - 1)
        self._check_int_tuple("never_emitted", "an id", self.vocab_size - 1, "token ids")
        if self.eos_id in self.never_emitted:
            raise ConfigError(f"never_emitted holds eos_id ({self.eos_id}): the model could never stop")
        if self.forced_first_id is not None and self.forced_first_id in self.never_emitted:
            raise ConfigError(f"never_emitted holds forced_first_id ({self.forced_first_id})")
        if self.d_kv is None and self.d_model % self.heads:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads}), or d_kv set")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        self._check_layer_options()
        self._check_scheme_options()
        self._check_decoder_options()
        self._check_encoder_options()

    def _check_int_tuple(self, name: str, item: str, high: int, what: str) -> None:
        """The field `name` as a tuple (JSON gives a list) of integers from 0 to `high`; else one line naming `what` it
        lists and `item` at fault."""
        value = getattr(self, name)
        if isinstance(value, list):  # read from JSON
            value = tuple(value)
            object.__setattr__(self, name, value)
        if not isinstance(value, tuple):
            raise ConfigError(f"{name} must be a list of {what}, got {value!r}")
        for i in value:
            check_int(f"{item} of {name}", i, 0, high)

    def _check_yarn(self) -> None:
        """YaRN's settings (checked whatever the scaling, so a saved config holds no bad value) and dynamic NTK's
        head width."""
        for name in ("rope_beta_fast", "rope_beta_slow"):
            _check_float(name, getattr(self, name), *YARN_BETA_RANGE)
        for name in ("rope_mscale", "rope_mscale_all_dim"):
            _check_float(name, getattr(self, name), 0.0, YARN_BETA_RANGE[1])
        if self.rope_attention_factor is not None:
            _check_float("rope_attention_factor", self.rope_attention_factor, *YARN_BETA_RANGE)
        if not isinstance(self.rope_truncate, bool):
            raise ConfigError(f"rope_truncate must be true or false, got {self.rope_truncate!r}")
        if self.rope_scaling == "dynamic" and self.positional == "rope" and self.d_head <= 2:
            raise ConfigError("dynamic rope scaling needs a head width above 2")

    def _check_layer_options(self) -> None:
        """The settings of the norms, attention, feed-forward network and head that imported families need."""
        _check_choice("normalization", self.normalization, NORMALIZATIONS)
        _check_float("norm_eps", self.norm_eps, *NORM_EPS_RANGE)
        if self.d_kv is not None:
            check_int("d_kv", self.d_kv, 1, LIMITS["d_model"])
        for name in ("scale_embeddings", "embedding_norm", "scale_scores", "attention_bias", "ffn_bias", "gated_ffn",
                     "tied_head", "head_rescale"):
            _check_bool(name, getattr(self, name))
        if not self.tied_head and not self.share_embeddings:
            raise ConfigError("tied_head = false needs share_embeddings (without it the head has its own matrix "
                              "already)")

    def _check_scheme_options(self) -> None:
        """The settings of RoPE, ALiBi and the relative bias, each within its bounds."""
        _check_float("rope_base", self.rope_base, *ROPE_BASE_RANGE)
        _check_float("alibi_max_bias", self.alibi_max_bias, *ALIBI_MAX_BIAS_RANGE)
        check_int("relative_buckets", self.relative_buckets, *RELATIVE_BUCKETS_RANGE)
        low = self.relative_buckets // 2 + 1  # the log-spaced buckets start at buckets/2 (one sign) and need room
        check_int("relative_max_distance", self.relative_max_distance, low, MAX_RELATIVE_DISTANCE)
        if self.positional == "rope" and self.d_head % 2:
            raise ConfigError(f"rope positions need an even head width d_model / heads, got {self.d_head}")

    def _check_decoder_options(self) -> None:
        """The decoder-only kind and what its families need: grouped heads, RoPE's scaling, sliding windows."""
        if self.kind == "decoder" and self.encoder_layers:
            raise ConfigError(f"a decoder-only model has no encoder: encoder_layers must be 0, got "
                              f"{self.encoder_layers}")
        if self.kv_heads is not None:
            check_int("kv_heads", self.kv_heads, 1, self.heads)
            if self.heads % self.kv_heads:
                raise ConfigError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.qkv_bias is not None:
            _check_bool("qkv_bias", self.qkv_bias)
        _check_bool("qk_norm", self.qk_norm)
        _check_bool("sandwich_norm", self.sandwich_norm)
        _check_bool("attention_only", self.attention_only)
        for name in ("parallel_residual", "final_norm", "input_norm", "joint_qk_norm", "head_bias"):
            _check_bool(name, getattr(self, name))
        if self.rope_dims is not None:
            check_int("rope_dims", self.rope_dims, 2, self.d_head)
            if self.rope_dims % 2 or self.positional != "rope":
                raise ConfigError(f"rope_dims ({self.rope_dims}) needs rope positions and an even number")
        if not self.input_norm and not self.sandwich_norm:
            raise ConfigError("input_norm = false needs sandwich_norm (a sub-layer's output is then its one norm)")
        if self.joint_qk_norm and not self.qk_norm:
            raise ConfigError("joint_qk_norm needs qk_norm")
        if self.kind == "decoder" and self.embedding_size is not None:
            check_int("embedding_size", self.embedding_size, 1, LIMITS["d_model"])
        check_int("experts", self.experts, 0, 1024)
        if self.experts:
            check_int("experts_per_token", self.experts_per_token, 1, self.experts)
        if self.expert_limit is not None:
            _check_float("expert_limit", self.expert_limit, 1e-3, 1e6)
            _check_float("expert_alpha", self.expert_alpha, 1e-3, 1e3)
            if not self.experts:
                raise ConfigError("expert_limit needs experts")
        if self.head_bias and self.tied_head:
            raise ConfigError("head_bias needs the head's own matrix (tied_head = false)")
        if self.query_scalar is not None:
            _check_float("query_scalar", self.query_scalar, 1.0, 1e6)
        for name in ("attention_softcap", "logit_softcap"):
            if getattr(self, name) is not None:
                _check_float(name, getattr(self, name), *SOFTCAP_RANGE)
        if self.local_rope_base is not None:
            _check_float("local_rope_base", self.local_rope_base, *ROPE_BASE_RANGE)
            if self.positional != "rope" or self.sliding_window is None:
                raise ConfigError("local_rope_base needs rope positions and a sliding window")
        if self.sandwich_norm and self.norm != "pre":
            raise ConfigError("sandwich_norm needs pre-norm sub-layers (norm = pre)")
        _check_choice("rope_scaling", self.rope_scaling, ROPE_SCALINGS)
        for name in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
            _check_float(name, getattr(self, name), *ROPE_FACTOR_RANGE)
        check_int("rope_original_max_positions", self.rope_original_max_positions, 1, LIMITS["max_positions"])
        if self.rope_scaling == "llama3" and self.rope_high_freq_factor <= self.rope_low_freq_factor:
            raise ConfigError("llama3 rope scaling needs rope_high_freq_factor above rope_low_freq_factor")
        self._check_yarn()
        if self.sliding_window is not None:
            check_int("sliding_window", self.sliding_window, 1, LIMITS["max_positions"])
        if self.sliding_layers is not None:
            self._check_int_tuple("sliding_layers", "a layer", self.decoder_layers - 1, "layer indices")
        what = {"seq2seq": "an encoder-decoder model", "encoder": "an encoder-only model"}.get(self.kind)
        if what and (given := [f.name for f in dataclasses.fields(self) if f.name in DECODER_OPTIONS
                               and f.name != "kind" and getattr(self, f.name) != f.default]):
            raise ConfigError(f"{', '.join(given)}: options of the decoder-only kind (kind = \"decoder\"), not of "
                              f"{what}")
        if self.kind != "seq2seq" and (given := [name for name, default in SEQ2SEQ_OPTIONS.items()
                                                 if getattr(self, name) != default]):
            reader = "a decoder-only model" if self.kind == "decoder" else "an encoder-only model"
            raise ConfigError(f"{', '.join(given)}: options of the encoder-decoder kind (kind = \"seq2seq\"); "
                              f"{reader} reads none of them")
        if self.kind == "decoder" and self.positional not in DECODER_POSITIONS:
            raise ConfigError(f"a decoder-only model takes positions {', '.join(DECODER_POSITIONS)}; got "
                              f"{self.positional!r}")

    def _check_encoder_options(self) -> None:
        """The encoder-only kind and what its families need: token types, a narrower embedding, the head."""
        if self.kind != "encoder":
            given = [f.name for f in dataclasses.fields(self) if f.name in ENCODER_OPTIONS
                     and getattr(self, f.name) != f.default
                     and (f.name, self.kind) != ("embedding_size", "decoder")]  # OPT's project_in / project_out
            if given:
                raise ConfigError(f"{', '.join(given)}: options of the encoder-only kind (kind = \"encoder\")")
            return
        if self.decoder_layers:
            raise ConfigError(f"an encoder-only model has no decoder: decoder_layers must be 0, got "
                              f"{self.decoder_layers}")
        if self.positional not in ENCODER_POSITIONS:
            raise ConfigError(f"an encoder-only model takes positions {', '.join(ENCODER_POSITIONS)}; got "
                              f"{self.positional!r}")
        check_int("type_vocab_size", self.type_vocab_size, 0, 1024)
        if self.embedding_size is not None:
            check_int("embedding_size", self.embedding_size, 1, LIMITS["d_model"])
        _check_choice("head_activation", self.head_activation, ACTIVATIONS)
        _check_bool("pad_positions", self.pad_positions)
        _check_bool("masked_lm_head", self.masked_lm_head)
        if self.shared_layers is not None:
            check_int("shared_layers", self.shared_layers, 1, self.encoder_layers)
        self._check_windowed_layers()
        self._check_disentangled()

    def _check_windowed_layers(self) -> None:
        """ModernBERT's local layers: a window radius, the layers it applies to, their RoPE base."""
        for name in ("first_attn_norm", "project_before_norm"):
            _check_bool(name, getattr(self, name))
        self._check_int_tuple("windowed_layers", "a layer", self.encoder_layers - 1, "layer indices")
        if self.window_radius is not None:
            check_int("window_radius", self.window_radius, 1, LIMITS["max_positions"])
        elif self.windowed_layers:
            raise ConfigError("windowed_layers needs window_radius")
        _check_float("windowed_rope_base", self.windowed_rope_base, *ROPE_BASE_RANGE)
        if not self.first_attn_norm and self.norm != "pre":
            raise ConfigError("first_attn_norm = false needs pre-norm layers (norm = pre)")

    def _check_disentangled(self) -> None:
        """DeBERTa's relative terms: only with "disentangled" positions."""
        if isinstance(self.pos_att_type, list):  # read from JSON
            object.__setattr__(self, "pos_att_type", tuple(self.pos_att_type))
        if not isinstance(self.pos_att_type, tuple) or any(t not in DISENTANGLED_TERMS for t in self.pos_att_type):
            raise ConfigError(f"pos_att_type must list terms of {', '.join(DISENTANGLED_TERMS)}, got "
                              f"{self.pos_att_type!r}")
        for name in ("position_biased_input", "share_att_key", "relative_norm"):
            _check_bool(name, getattr(self, name))
        check_int("position_buckets", self.position_buckets, 0, MAX_RELATIVE_DISTANCE)
        check_int("max_relative_positions", self.max_relative_positions, 2, MAX_RELATIVE_DISTANCE)
        check_int("conv_kernel_size", self.conv_kernel_size, 0, 64)
        check_int("conv_groups", self.conv_groups, 1, self.d_model)
        _check_choice("conv_activation", self.conv_activation, ("tanh", *ACTIVATIONS))
        if self.conv_kernel_size and self.d_model % self.conv_groups:
            raise ConfigError(f"conv_groups ({self.conv_groups}) must divide d_model ({self.d_model})")
        if self.positional != "disentangled" and (self.position_biased_input or self.position_buckets
                                                  or self.share_att_key or self.pos_att_type or self.relative_norm
                                                  or self.conv_kernel_size):
            raise ConfigError("position_biased_input, position_buckets, share_att_key, pos_att_type, relative_norm "
                              "and conv_kernel_size are options of disentangled positions (DeBERTa)")

    @property
    def kv_group(self) -> int:
        """How many query heads read each key/value head (1 without grouping)."""
        return 1 if self.kv_heads is None else self.heads // self.kv_heads

    @property
    def d_head(self) -> int:
        """Width of one head: d_k = d_v = d_model / h, or `d_kv` where set."""
        return self.d_model // self.heads if self.d_kv is None else self.d_kv

    def to_dict(self) -> dict[str, Any]:
        """The values; the options added for imported models and the positional schemes' settings only where they
        differ from their defaults, so the config (and its digest in every saved model) of a model that does not
        use them reads as before they existed."""
        data = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.name in IMPORT_OPTIONS + SCHEME_OPTIONS + DECODER_OPTIONS + ENCODER_OPTIONS and \
                    data[f.name] == f.default:
                del data[f.name]
        for name in ("never_emitted", "sliding_layers", "windowed_layers", "pos_att_type"):
            if data.get(name) is not None:
                data[name] = list(data[name])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> ModelConfig:
        """The config of `data`; an unknown key or a bad value raises `ConfigError` naming it (and `source`)."""
        return from_dict(cls, data, source)

    def save(self, path: str | Path) -> None:
        """Write `to_dict` as JSON (a model directory's ``config.json``)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        """Read a ``config.json``; a missing, oversized or invalid file raises `ConfigError` naming it."""
        path = Path(path)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes, more than the {MAX_CONFIG_BYTES:,} a config file may have")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, RecursionError) as err:  # bad JSON or UTF-8, an over-long number, too deep nesting
            raise ConfigError(f"{path}: not valid JSON ({err})") from None
        return from_dict(cls, data, str(path))
