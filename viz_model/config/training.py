"""`TrainConfig`: one training run, saved inside the run directory; its optional ``[[corpora]]`` tables
(`CorpusConfig`) mix several corpora with sampling weights. Unknown keys fail when read from a file."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import ConfigError, _check_bool, _check_choice, _check_float, check_int, from_dict
from .data_root import resolve_data_dir
from .model import ModelConfig

HOLDOUT_RULE_NAMES = ("source", "connected")  # see viz_model/train/splits.py
HOLDOUT_SEED = 20180513  # default seed of held-out splits: the Tatoeba export's date (see viz_model/train/splits.py)
TRANSLATION_SETTINGS = ("src_lang", "tgt_lang", "eval_bleu_sentences", "eval_beam")  # what a decoder-only run refuses
CORPUS_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class CorpusConfig:
    """One ``[[corpora]]`` table of a mixed run: where a corpus's files are, which splits it gives, its weight.

    `data_dir` names a data set under the data root (``multi30k``: `viz_model.config.data_root`) or a folder path
    (absolute, ``~/...``, ``./...`` or ``../...``). Splits come either from files (`train`, `val` and `test`
    prefixes in `data_dir`) or, with `holdout`, from one file pair split by distinct source sentence
    (`viz_model.train.splits`). A corpus without training data is evaluation-only (e.g. newstest2014). `weight` =
    copies of the training pairs per epoch (fractions subsample).
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
        check_int("holdout_val", self.holdout_val, 0, 10_000_000)
        check_int("holdout_test", self.holdout_test, 0, 10_000_000)
        check_int("holdout_seed", self.holdout_seed, 0, 2**63 - 1)
        _check_choice("holdout_rule", self.holdout_rule, HOLDOUT_RULE_NAMES)
        if self.holdout and (self.train or self.val or self.test):
            raise ConfigError("with holdout, the train, val and test parts come from the split: leave train, val "
                              "and test out")
        if not (self.train or self.val or self.test or self.holdout):
            raise ConfigError("no data: set train, val, test or holdout")

    @property
    def path(self) -> Path:
        """The folder `data_dir` means (a data-set name under the data root, else the path as given)."""
        return resolve_data_dir(self.data_dir)

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

    Data is either one corpus (`data_dir`, a data set under the data root or a folder path, with `train_prefix`,
    `val_prefix`, `test_prefixes`: the original format) or, when `corpora` is given, a weighted mix of
    ``[[corpora]]`` tables; the two formats exclude each other.
    `init_from` (a model directory, relative to the working directory) warm-starts a new run from its weights and
    tokenizer; its model config must equal `model`. `bf16` trains under bf16 autocast (fp32 weights, optimizer and
    loss) on CUDA and on CPUs that multiply bf16 in hardware (AVX512-BF16, AMX); other CPUs train in fp32.
    A decoder-only model (``[model] kind = "decoder"``) learns next-token prediction on plain text lines: the
    ``{prefix}.{text_lang}`` files of each split (one side of a parallel corpus, or a folder of text files),
    validated and scored by its loss.
    `cooldown_epochs` > 0 ends the schedule with a linear decay of the learning rate to zero over the last that many
    epochs (a "warm-up, stable, decay" schedule).
    `pack_len` > 0 packs a decoder-only run's training lines into sequences of up to that many tokens (each line
    ends with ``</s>``), `pack_repeat` the chance that a packed line is a copy of an earlier line of its sequence
    (`viz_model.train.packing`), `pack_spans` the chance that it is a span of random pieces followed by its copy
    instead (a copying curriculum); validation stays one line a sequence. `series_every_steps` > 0 saves a loadable
    model folder every that many steps under ``series/`` (`viz_model.modeldir.series`).
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    data_dir: str = "multi30k"
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
    text_lang: str = ""
    pack_len: int = 0
    pack_repeat: float = 0.0
    pack_spans: float = 0.0
    series_every_steps: int = 0

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
                                ("eval_beam", 1, 64), ("threads", 0, 1024), ("pack_len", 0, 65_536),
                                ("series_every_steps", 0, 10_000_000)):
            check_int(name, getattr(self, name), low, high)
        for name, low, high in (("lr_scale", 0.0, 1e3), ("lr_peak", 0.0, 1.0), ("adam_beta1", 0.0, 0.9999),
                                ("adam_beta2", 0.0, 0.99999), ("adam_eps", 0.0, 1.0),
                                ("weight_decay", 0.0, 1.0), ("label_smoothing", 0.0, 0.99),
                                ("clip_norm", 0.0, 1e6), ("pack_repeat", 0.0, 0.9),
                                ("pack_spans", 0.0, 0.9)):
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
        if self.pack_len > self.max_len:
            raise ConfigError(f"pack_len ({self.pack_len}) exceeds max_len ({self.max_len})")
        if (self.pack_len or self.pack_repeat) and self.model.kind != "decoder":
            raise ConfigError("pack_len and pack_repeat pack a decoder-only run's lines; this run's model kind is "
                              f"{self.model.kind!r}")
        if self.pack_repeat and not self.pack_len:
            raise ConfigError(f"pack_repeat ({self.pack_repeat}) repeats lines inside packed sequences: set pack_len")
        if self.pack_spans and not self.pack_len:
            raise ConfigError(f"pack_spans ({self.pack_spans}) adds random spans to packed sequences: set pack_len")
        if self.pack_repeat + self.pack_spans >= 1.0:
            raise ConfigError(f"pack_repeat ({self.pack_repeat}) and pack_spans ({self.pack_spans}) must sum to "
                              "less than 1: no caption would be packed")
        if self.average_last > self.keep_epoch_checkpoints:
            raise ConfigError(f"average_last ({self.average_last}) exceeds keep_epoch_checkpoints "
                              f"({self.keep_epoch_checkpoints})")
        self._check_kind()
        if self.corpora is not None:
            object.__setattr__(self, "corpora", _read_corpora(self.corpora))
            single = [f.name for f in dataclasses.fields(self)
                      if f.name in ("data_dir", "train_prefix", "val_prefix", "test_prefixes")
                      and getattr(self, f.name) != f.default]
            if single:
                raise ConfigError(f"{', '.join(single)} belong(s) to the single-corpus format; with [[corpora]] "
                                  "set data_dir, train, val and test in each corpus table")

    def _check_kind(self) -> None:
        """A decoder-only model learns the lines of one language's files (`text_lang`), an encoder-only one fills
        masked tokens of them; what only a translation run reads is refused on both, and `text_lang` on a
        translator."""
        if not isinstance(self.text_lang, str):
            raise ConfigError(f"text_lang must be a file ending such as \"en\" (a string), got {self.text_lang!r}")
        if self.model.kind == "seq2seq":
            if self.text_lang:
                raise ConfigError(f"text_lang ({self.text_lang!r}) is a setting of decoder-only runs ([model] kind = "
                                  "\"decoder\"); a translation run reads src_lang and tgt_lang")
            return
        run, learns = (("a decoder-only run", "learns the lines") if self.model.kind == "decoder" else
                       ("an encoder-only run", "learns to fill masked tokens"))
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        if given := [name for name in TRANSLATION_SETTINGS if getattr(self, name) != defaults[name]]:
            raise ConfigError(f"{', '.join(given)}: settings of translation runs; {run} {learns} "
                              "of its text_lang files and is scored by its loss")
        if not self.text_lang:
            raise ConfigError(f"{run} learns plain text lines: set text_lang, the ending of its files "
                              "(\"en\" reads train.en of a parallel corpus, \"txt\" a folder's train.txt)")
        if self.init_from:
            raise ConfigError("init_from: warm starts are implemented for translation runs only")

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
        for name in ("init_from", "cooldown_epochs", "text_lang", "pack_len", "pack_repeat", "pack_spans",
                     "series_every_steps"):
            if not data[name]:  # runs without them keep their original form (saved runs from before compare equal)
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
            key = (os.path.realpath(corpus.path), prefix)
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
