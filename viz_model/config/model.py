"""`ModelConfig`: the network, saved inside every model directory (``config.json``); the only place its defaults
live."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import ConfigError, _check_bool, _check_choice, _check_float, _check_int, from_dict

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope", "alibi", "relative")
INPUT_POSITIONS = ("sinusoidal", "learned")  # added to the input; the other schemes put position into the scores
SINUSOID_LAYOUTS = ("interleaved", "halves")  # sin/cos in alternate dimensions (the paper) or in two halves (Marian)
SINUSOID_FREQUENCIES = ("paper", "fairseq")  # 10000^(-2i/d_model), or exp(-i ln(10000) / (d_model/2 - 1)) (M2M100)
ACTIVATIONS = ("relu", "silu", "gelu")
NORM_KINDS = ("post", "pre")
IMPORT_OPTIONS = ("sinusoid_layout", "sinusoid_frequencies", "position_offset", "activation", "output_bias", "bos_id",
                  "eos_id", "unk_id", "never_emitted", "forced_first_id", "eos_at_limit")
SCHEME_OPTIONS = ("rope_base", "alibi_max_bias", "relative_buckets", "relative_max_distance")
ROPE_BASE_RANGE = (2.0, 1e9)
ALIBI_MAX_BIAS_RANGE = (0.5, 64.0)
RELATIVE_BUCKETS_RANGE = (4, 1024)
MAX_POSITION_OFFSET = 16
MAX_CONFIG_BYTES = 1024**2  # a model's config.json is a few hundred bytes: anything huge is damaged or hostile
LIMITS = {"vocab_size": 1_000_000, "d_model": 16_384, "d_ff": 65_536, "heads": 256,
          "encoder_layers": 128, "decoder_layers": 128, "max_positions": 65_536}


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
    :ivar position_offset: position p reads row p + offset of the sinusoid table (M2M100: 2, after its pad id)
    :ivar activation: of the feed-forward network: "relu", "silu" or "gelu"
    :ivar output_bias: a bias on the output logits (Marian's final_logits_bias)
    :ivar bos_id: the decoder's first input (Marian starts from its pad id)
    :ivar eos_id: the end-of-sentence id
    :ivar unk_id: the unknown piece's id
    :ivar never_emitted: ids whose logits are -inf: the model never outputs them (Marian: pad)
    :ivar forced_first_id: the first output, forced (M2M100: the target language's code); None: not forced
    :ivar eos_at_limit: the last output a length limit allows is forced to be `eos_id` (Hugging Face's
        forced_eos_token_id, which opus-mt's generation configs set), rather than a hypothesis cut off without it
    :ivar rope_base: RoPE's base: pair i turns by ``base^(-2i/d_head)`` per position (Llama 2: 10000)
    :ivar alibi_max_bias: ALiBi's slopes are ``2^(-max_bias * h / H)`` (8 in the paper and BLOOM)
    :ivar relative_buckets: the distance buckets of T5's relative bias (T5: 32)
    :ivar relative_max_distance: distances from here on share the last bucket (T5: 128)
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
    rope_base: float = 10000.0
    alibi_max_bias: float = 8.0
    relative_buckets: int = 32
    relative_max_distance: int = 128

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "d_ff", "heads", "encoder_layers", "decoder_layers",
                     "max_positions"):
            _check_int(name, getattr(self, name), 1, LIMITS[name])
        _check_int("pad_id", self.pad_id, 0, self.vocab_size - 1)
        _check_float("dropout", self.dropout, 0.0, 0.99)
        _check_float("attention_dropout", self.attention_dropout, 0.0, 0.99)
        _check_choice("positional", self.positional, POSITIONAL_KINDS)
        _check_choice("norm", self.norm, NORM_KINDS)
        _check_bool("share_embeddings", self.share_embeddings)
        _check_choice("sinusoid_layout", self.sinusoid_layout, SINUSOID_LAYOUTS)
        _check_choice("sinusoid_frequencies", self.sinusoid_frequencies, SINUSOID_FREQUENCIES)
        _check_int("position_offset", self.position_offset, 0, MAX_POSITION_OFFSET)
        if self.position_offset and self.positional != "sinusoidal":
            raise ConfigError("position_offset needs sinusoidal positions (a learned table is trained from row 0)")
        if self.forced_first_id is not None:
            _check_int("forced_first_id", self.forced_first_id, 0, self.vocab_size - 1)
        _check_choice("activation", self.activation, ACTIVATIONS)
        _check_bool("output_bias", self.output_bias)
        _check_bool("eos_at_limit", self.eos_at_limit)
        for name in ("bos_id", "eos_id", "unk_id"):
            _check_int(name, getattr(self, name), 0, self.vocab_size - 1)
        if isinstance(self.never_emitted, list):  # read from JSON
            object.__setattr__(self, "never_emitted", tuple(self.never_emitted))
        if not isinstance(self.never_emitted, tuple):
            raise ConfigError(f"never_emitted must be a list of token ids, got {self.never_emitted!r}")
        for i in self.never_emitted:
            _check_int("an id of never_emitted", i, 0, self.vocab_size - 1)
        if self.eos_id in self.never_emitted:
            raise ConfigError(f"never_emitted holds eos_id ({self.eos_id}): the model could never stop")
        if self.forced_first_id is not None and self.forced_first_id in self.never_emitted:
            raise ConfigError(f"never_emitted holds forced_first_id ({self.forced_first_id})")
        if self.d_model % self.heads:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        self._check_scheme_options()

    def _check_scheme_options(self) -> None:
        """The settings of RoPE, ALiBi and the relative bias, each within its bounds."""
        _check_float("rope_base", self.rope_base, *ROPE_BASE_RANGE)
        _check_float("alibi_max_bias", self.alibi_max_bias, *ALIBI_MAX_BIAS_RANGE)
        _check_int("relative_buckets", self.relative_buckets, *RELATIVE_BUCKETS_RANGE)
        low = self.relative_buckets // 2 + 1  # the log-spaced buckets start at buckets/2 (one sign) and need room
        _check_int("relative_max_distance", self.relative_max_distance, low, LIMITS["max_positions"])
        if self.positional == "rope" and self.d_head % 2:
            raise ConfigError(f"rope positions need an even head width d_model / heads, got {self.d_head}")

    @property
    def d_head(self) -> int:
        """Width of one head: d_k = d_v = d_model / h."""
        return self.d_model // self.heads

    def to_dict(self) -> dict[str, Any]:
        """The values; the options added for imported models and the positional schemes' settings only where they
        differ from their defaults, so the config (and its digest in every saved model) of a model that does not
        use them reads as before they existed."""
        data = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.name in IMPORT_OPTIONS + SCHEME_OPTIONS and data[f.name] == f.default:
                del data[f.name]
        if "never_emitted" in data:
            data["never_emitted"] = list(data["never_emitted"])
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
