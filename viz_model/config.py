"""Configuration dataclasses: the only place where defaults live.

`ModelConfig` describes the network and is saved inside every model directory (``config.json``);
`TrainConfig` describes one training run and is saved inside the run directory; its optional ``[[corpora]]``
tables (`CorpusConfig`) mix several corpora with sampling weights. All validate their values on construction
and reject unknown keys when read from a file, so a typo fails loudly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

POSITIONAL_KINDS = ("sinusoidal", "learned")
SINUSOID_LAYOUTS = ("interleaved", "halves")  # sin/cos in alternate dimensions (the paper) or in two halves (Marian)
SINUSOID_FREQUENCIES = ("paper", "fairseq")  # 10000^(-2i/d_model), or exp(-i ln(10000) / (d_model/2 - 1)) (M2M100)
ACTIVATIONS = ("relu", "silu", "gelu")
NORM_KINDS = ("post", "pre")
IMPORT_OPTIONS = ("sinusoid_layout", "sinusoid_frequencies", "position_offset", "activation", "output_bias", "bos_id",
                  "eos_id", "unk_id", "never_emitted", "forced_first_id", "eos_at_limit")
MAX_POSITION_OFFSET = 16
HOLDOUT_RULE_NAMES = ("source", "connected")  # see viz_model/train/splits.py
HOLDOUT_SEED = 20180513  # default seed of held-out splits: the Tatoeba export's date (see viz_model/train/splits.py)
CORPUS_NAME = re.compile(r"[A-Za-z0-9_.-]+")
MAX_CONFIG_BYTES = 1024**2  # a model's config.json is a few hundred bytes: anything huge is damaged or hostile
LIMITS = {"vocab_size": 1_000_000, "d_model": 16_384, "d_ff": 65_536, "heads": 256,
          "encoder_layers": 128, "decoder_layers": 128, "max_positions": 65_536}


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message names it."""


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low}, {high}], got {value}")


def _check_float(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} must be in [{low}, {high}], got {value}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def from_dict(cls: type[T], data: dict[str, Any], source: str = "config") -> T:
    """Build dataclass `cls` from `data`, naming any unknown key (with the closest known one)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys to values, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        import difflib

        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(f"{source}: unknown key(s) {', '.join(hints)} for {cls.__name__}")
    try:
        return cls(**data)
    except (TypeError, ConfigError) as err:  # e.g. a missing required field, or a value out of range
        raise ConfigError(f"{source}: {err}") from None


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
    :ivar positional: "sinusoidal" (the paper) or "learned"
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

    @property
    def d_head(self) -> int:
        """Width of one head: d_k = d_v = d_model / h."""
        return self.d_model // self.heads

    def to_dict(self) -> dict[str, Any]:
        """The values; the options added for imported models only where they differ from their defaults, so the
        config (and its digest in every saved model) of a model that does not use them reads as before they existed."""
        data = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if f.name in IMPORT_OPTIONS and data[f.name] == f.default:
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


@dataclass(frozen=True)
class CorpusConfig:
    """One ``[[corpora]]`` table of a mixed run: where a corpus's files are, which splits it gives, its weight.

    Splits come either from files (`train`, `val` and `test` prefixes in `data_dir`) or, with `holdout`, from one
    file pair split by distinct source sentence (`viz_model.train.splits`). A corpus without training data is
    evaluation-only (e.g. newstest2014). `weight` = copies of the training pairs per epoch (fractions subsample).
    """

    name: str
    data_dir: str
    train: str = ""
    val: str = ""
    test: tuple[str, ...] = ()
    weight: float = 1.0
    holdout: str = ""
    holdout_val: int = 1000
    holdout_test: int = 1000
    holdout_seed: int = HOLDOUT_SEED
    holdout_rule: str = "source"  # "connected" for new runs (viz_model/train/splits.py); "source" rebuilds old ones

    def __post_init__(self) -> None:
        if isinstance(self.test, list):
            object.__setattr__(self, "test", tuple(self.test))
        if not isinstance(self.name, str) or not CORPUS_NAME.fullmatch(self.name):
            raise ConfigError(f"name must be letters, digits, '_', '.' or '-' (it names results), got {self.name!r}")
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ConfigError(f"data_dir must be a non-empty string, got {self.data_dir!r}")
        for key in ("train", "val", "holdout"):
            if not isinstance(getattr(self, key), str):
                raise ConfigError(f"{key} must be a file prefix (a string), got {getattr(self, key)!r}")
        if not isinstance(self.test, tuple) or not all(isinstance(p, str) and p for p in self.test):
            raise ConfigError(f"test must be a list of file prefixes, got {self.test!r}")
        _check_float("weight", self.weight, -math.inf, 1000.0)
        if self.weight <= 0:
            raise ConfigError(f"weight must be above 0, got {self.weight} (leave the corpus out instead)")
        _check_int("holdout_val", self.holdout_val, 0, 10_000_000)
        _check_int("holdout_test", self.holdout_test, 0, 10_000_000)
        _check_int("holdout_seed", self.holdout_seed, 0, 2**63 - 1)
        _check_choice("holdout_rule", self.holdout_rule, HOLDOUT_RULE_NAMES)
        if self.holdout and (self.train or self.val or self.test):
            raise ConfigError("with holdout, the train, val and test parts come from the split: leave train, val "
                              "and test out")
        if not (self.train or self.val or self.test or self.holdout):
            raise ConfigError("no data: set train, val, test or holdout")

    @property
    def trains(self) -> bool:
        """Whether the corpus gives training pairs (and so takes part in the mix and the tokenizer)."""
        return bool(self.train or self.holdout)

    def prefixes(self) -> list[str]:
        """Every file prefix the corpus reads, to find two corpora reading the same files."""
        return [p for p in (self.train, self.val, self.holdout, *self.test) if p]

    def to_dict(self) -> dict[str, Any]:
        data = {**dataclasses.asdict(self), "test": list(self.test)}
        if data["holdout_rule"] == "source":  # runs from before the setting existed keep their form
            del data["holdout_rule"]
        return data


@dataclass(frozen=True)
class TrainConfig:
    """One training run: model, data, optimisation and schedule (the paper's recipe, as knobs).

    Data is either one corpus (`data_dir` with `train_prefix`, `val_prefix`, `test_prefixes`: the original format)
    or, when `corpora` is given, a weighted mix of ``[[corpora]]`` tables; the two formats exclude each other.
    `init_from` (a model directory, relative to the working directory) warm-starts a new run from its weights and
    tokenizer; its model config must equal `model`. `bf16` trains under bf16 autocast (fp32 weights, optimizer and
    loss) on CUDA and on CPUs that multiply bf16 in hardware (AVX512-BF16, AMX); other CPUs train in fp32.
    `cooldown_epochs` > 0 ends the schedule with a linear decay of the learning rate to zero over the last that many
    epochs (a "warm-up, stable, decay" schedule).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    data_dir: str = "../shared/data/multi30k"
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_prefix: str = "train"
    val_prefix: str = "val"
    test_prefixes: tuple[str, ...] = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
    corpora: tuple[CorpusConfig, ...] | None = None
    vocab_size: int = 8000
    tokenizer_type: str = "bpe"
    max_len: int = 128
    batch_tokens: int = 4000
    epochs: int = 30
    cooldown_epochs: int = 0
    max_steps: int = 0
    lr_scale: float = 1.0
    lr_peak: float = 0.0
    warmup_steps: int = 4000
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float = 0.0
    seed: int = 1234
    checkpoint_every_steps: int = 500
    keep_epoch_checkpoints: int = 5
    average_last: int = 5
    eval_every_epochs: int = 1
    eval_bleu_sentences: int = 1014
    eval_beam: int = 1
    threads: int = 0
    device: str = "auto"
    compile: bool = False
    bf16: bool = True
    init_from: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            object.__setattr__(self, "model", ModelConfig.from_dict(self.model, "model"))
        if isinstance(self.test_prefixes, list):
            object.__setattr__(self, "test_prefixes", tuple(self.test_prefixes))
        if not isinstance(self.model, ModelConfig):
            raise ConfigError(f"model must be a table of model settings, got {self.model!r}")
        for name in ("data_dir", "src_lang", "tgt_lang", "train_prefix", "val_prefix"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        if not isinstance(self.test_prefixes, tuple) or not all(isinstance(p, str) for p in self.test_prefixes):
            raise ConfigError(f"test_prefixes must be a list of strings, got {self.test_prefixes!r}")
        for name, low, high in (("vocab_size", 64, 1_000_000), ("max_len", 2, 65_536),
                                ("batch_tokens", 16, 10_000_000), ("epochs", 0, 100_000),
                                ("cooldown_epochs", 0, 100_000),
                                ("max_steps", 0, 100_000_000), ("warmup_steps", 1, 10_000_000),
                                ("seed", 0, 2**31 - 1), ("checkpoint_every_steps", 1, 10_000_000),
                                ("keep_epoch_checkpoints", 1, 1000), ("average_last", 1, 1000),
                                ("eval_every_epochs", 0, 100_000), ("eval_bleu_sentences", 0, 10_000_000),
                                ("eval_beam", 1, 64), ("threads", 0, 1024)):
            _check_int(name, getattr(self, name), low, high)
        for name, low, high in (("lr_scale", 0.0, 1e3), ("lr_peak", 0.0, 1.0), ("adam_beta1", 0.0, 0.9999),
                                ("adam_beta2", 0.0, 0.99999), ("adam_eps", 0.0, 1.0),
                                ("weight_decay", 0.0, 1.0), ("label_smoothing", 0.0, 0.99),
                                ("clip_norm", 0.0, 1e6)):
            _check_float(name, getattr(self, name), low, high)
        _check_choice("tokenizer_type", self.tokenizer_type, ("bpe", "unigram"))
        _check_choice("device", self.device, ("auto", "cpu", "cuda"))
        _check_bool("compile", self.compile)
        _check_bool("bf16", self.bf16)
        if not isinstance(self.init_from, str):
            raise ConfigError(f"init_from must be the path of a model directory (a string), got {self.init_from!r}")
        if self.epochs == 0 and self.max_steps == 0:
            raise ConfigError("set epochs or max_steps above 0: the run would train nothing")
        if self.cooldown_epochs and self.max_steps:
            raise ConfigError(f"cooldown_epochs ({self.cooldown_epochs}) counts epochs: it needs a run that ends "
                              f"after `epochs`, not at max_steps ({self.max_steps})")
        if self.cooldown_epochs > self.epochs:
            raise ConfigError(f"cooldown_epochs ({self.cooldown_epochs}) exceeds epochs ({self.epochs})")
        if self.max_len > self.model.max_positions:
            raise ConfigError(f"max_len ({self.max_len}) exceeds model.max_positions ({self.model.max_positions})")
        if self.average_last > self.keep_epoch_checkpoints:
            raise ConfigError(f"average_last ({self.average_last}) exceeds keep_epoch_checkpoints "
                              f"({self.keep_epoch_checkpoints})")
        if self.corpora is not None:
            object.__setattr__(self, "corpora", _read_corpora(self.corpora))
            single = [f.name for f in dataclasses.fields(self)
                      if f.name in ("data_dir", "train_prefix", "val_prefix", "test_prefixes")
                      and getattr(self, f.name) != f.default]
            if single:
                raise ConfigError(f"{', '.join(single)} belong(s) to the single-corpus format; with [[corpora]] "
                                  "set data_dir, train, val and test in each corpus table")

    @property
    def corpus_list(self) -> tuple[CorpusConfig, ...]:
        """The corpora of the run; the single-corpus format is one corpus named after its directory."""
        if self.corpora is not None:
            return self.corpora
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(self.data_dir).name) or "data"
        return (CorpusConfig(name, self.data_dir, self.train_prefix, self.val_prefix, self.test_prefixes),)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["model"] = self.model.to_dict()  # its options for imported models only where set (see ModelConfig)
        data["test_prefixes"] = list(self.test_prefixes)
        if self.corpora is None:
            del data["corpora"]  # single-corpus configs keep their original form (saved runs compare equal)
        else:
            data["corpora"] = [c.to_dict() for c in self.corpora]
        for name in ("init_from", "cooldown_epochs"):  # runs without them keep their original form (saved runs
            if not data[name]:                          # from before these settings existed compare equal)
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config") -> TrainConfig:
        return from_dict(cls, data, source)

    @classmethod
    def from_toml(cls, path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
        """Read a TOML file (a `[model]` table for the network) and apply `key=value` overrides."""
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: not valid TOML ({err})") from None
        for item in overrides or []:
            apply_override(data, item)
        return from_dict(cls, data, str(path))


def _corpus_label(table: Any, index: int) -> str:
    """How errors name a ``[[corpora]]`` table: by its name, else by its position (1-based)."""
    name = table.get("name") if isinstance(table, dict) else None
    return f"corpus {name!r}" if isinstance(name, str) else f"corpus #{index + 1}"


def _read_corpora(value: Any) -> tuple[CorpusConfig, ...]:
    """The ``[[corpora]]`` tables as `CorpusConfig`s, refusing an empty list, duplicates and a mix with no training
    data, so that such configs fail before any file is read."""
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"corpora must be a list of [[corpora]] tables, got {value!r}")
    if not value:
        raise ConfigError("corpora is empty: add at least one [[corpora]] table, or leave corpora out and set data_dir")
    corpora = tuple(c if isinstance(c, CorpusConfig) else from_dict(CorpusConfig, c, _corpus_label(c, i))
                    for i, c in enumerate(value))
    names: set[str] = set()
    readers: dict[tuple[str, str], str] = {}
    for corpus in corpora:
        if corpus.name in names:
            raise ConfigError(f"two corpora are named {corpus.name!r}: corpus names must be unique")
        names.add(corpus.name)
        for prefix in corpus.prefixes():
            key = (os.path.realpath(corpus.data_dir), prefix)
            files = f"{corpus.data_dir}/{prefix}.*"
            if (first := readers.get(key)) == corpus.name:
                raise ConfigError(f"duplicate corpora: corpus {first!r} reads the same files {files} twice")
            if first is not None:
                raise ConfigError(f"duplicate corpora: {first!r} and {corpus.name!r} both read the files {files}")
            readers[key] = corpus.name
    if not any(c.trains for c in corpora):
        raise ConfigError("no corpus has training data: give at least one corpus a train prefix or holdout")
    return corpora


def apply_override(data: dict[str, Any], item: str) -> None:
    """Apply one `dotted.key=value` override in place; the value is parsed as TOML (strings may be bare).

    A part may name an entry of an array of tables by its ``name`` (or index): ``corpora.tatoeba.weight=0.5``.
    """
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {item!r} must look like key=value (e.g. model.d_model=256)")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    parts = key.strip().split(".")
    target = data
    for part in parts[:-1]:
        if isinstance(target, list):
            found = [t for i, t in enumerate(target) if isinstance(t, dict) and part in (t.get("name"), str(i))]
            if not found:
                raise ConfigError(f"override {item!r}: no table named {part!r} in that list")
            target = found[0]
        else:
            target = target.setdefault(part, {})
        if not isinstance(target, (dict, list)):
            raise ConfigError(f"override {item!r}: {part!r} is not a table")
    if isinstance(target, list):
        raise ConfigError(f"override {item!r}: {parts[-2]!r} is a list of tables; name one, e.g. {parts[-2]}.NAME.key")
    target[parts[-1]] = value
