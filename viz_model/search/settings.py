"""How a model searches for its translations: this project's rules or transformers' `generate`, and their settings.

Two rules (see docs and `viz_model.search.decoding`):

- ``"project"``: GNMT's length penalty ``((5 + |Y|) / 6) ** alpha``, OpenNMT's stop, a limit of source + 50 tokens
  (this project's own models; beam 4, alpha 0.6 by default);
- ``"transformers"``: Hugging Face transformers 5's beam search (``viz_model.search.transformers_rule``) with the
  settings of the model's generation config (`HFGeneration`): what ``model.generate()`` gives. Imported models
  search by this rule by default.

An imported model keeps the settings it was imported with in ``generation.json``; a model without that file is
this project's own, searching by the project's rule, and its transformers settings are the ones ``viz-model
export-hf`` writes into the exported folder's generation_config.json.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import ConfigError, ModelConfig
from ..config.checks import check_int, is_int
from ..modeldir.checkpoint import optional_json

GENERATION = "generation.json"
MAX_GENERATION_BYTES = 1024**2
RULES = {"project": "this project's rules (GNMT length penalty, OpenNMT stop)",
         "transformers": "as transformers' generate (the model's generation config)"}
PROJECT_BEAM, PROJECT_ALPHA = 4, 0.6
MAX_BEAM = 16  # the widest beam the explorer searches
MAX_LENGTH_PENALTY = 5.0  # |alpha| at most, either rule
TRANSFORMERS_MAX_LENGTH = 20  # transformers' default: 20 new tokens when a config sets no max_length
# settings transformers reads that change nothing in a deterministic beam or greedy search's output
NO_EFFECT = {"use_cache", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
             "return_dict_in_generate", "transformers_version", "_from_model_config", "bos_token_id", "pad_token_id",
             "temperature", "top_k", "top_p", "typical_p", "min_p", "top_h", "epsilon_cutoff", "eta_cutoff",
             "num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
             "assistant_lookbehind", "target_lookbehind", "is_assistant", "cache_implementation", "cache_config",
             "compile_config", "disable_compile", "prefill_chunk_size", "max_cache_len", "num_return_sequences"}
USED = {"num_beams", "length_penalty", "early_stopping", "max_length", "max_new_tokens", "min_length",
        "min_new_tokens", "no_repeat_ngram_size", "bad_words_ids", "forced_bos_token_id", "forced_eos_token_id",
        "renormalize_logits", "suppress_tokens", "eos_token_id", "decoder_start_token_id", "do_sample"}
# settings whose neutral value is what the search does; any other value is said and not used
NEUTRAL = {"repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "encoder_no_repeat_ngram_size": 0,
           "num_beam_groups": 1, "diversity_penalty": 0.0, "guidance_scale": 1.0, "remove_invalid_values": False,
           "low_memory": False, "token_healing": False, "exponential_decay_length_penalty": None,
           "begin_suppress_tokens": None, "sequence_bias": None, "constraints": None, "force_words_ids": None,
           "penalty_alpha": None, "dola_layers": None, "max_time": None, "stop_strings": None,
           "watermarking_config": None, "prompt_lookup_num_tokens": None, "max_matching_ngram_size": None,
           "assistant_early_exit": None, "use_mtp": None, "speculation_type": None,
           "assistant_ensemble_weight": None, "continuous_batching_config": None}
GENERATION_KEYS = USED | NO_EFFECT | set(NEUTRAL)


class GenerationError(ValueError):
    """Generation settings that cannot be used; the message names the file and the setting."""


@dataclass(frozen=True)
class HFGeneration:
    """transformers 5's settings for a deterministic search, resolved as its ``generate`` resolves them.

    `max_length` counts the decoder's start token (transformers' convention: at most ``max_length - 1`` new tokens);
    `min_length` likewise (``</s>`` is banned while the sequence, start token included, is shorter). `forced_eos`:
    the last token `max_length` allows is ``</s>`` (``forced_eos_token_id``). `notes`: settings the folder has that
    this project does not implement, each with what is used instead.

    :ivar num_beams: the beam width (1: greedy)
    :ivar length_penalty: the exponent of the length in the beam's score (negative values favour short outputs)
    :ivar early_stopping: True, False or "never", as transformers reads it
    :ivar max_length: the longest output, the decoder's start token counted
    :ivar min_length: the shortest output, the start token counted
    :ivar no_repeat_ngram_size: no n-gram of this size occurs twice (0: off)
    :ivar bad_words_ids: id sequences the search never completes
    :ivar suppress_tokens: ids never output
    :ivar forced_bos_token_id: the first output, forced; None: not forced
    :ivar forced_eos: the last token `max_length` allows is ``</s>``
    :ivar renormalize_logits: log-softmax again after the bans
    :ivar source: where the settings were read (a folder's file or ``viz-model export-hf``)
    :ivar notes: settings not implemented, each with what is used instead
    """

    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    max_length: int = TRANSFORMERS_MAX_LENGTH + 1
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    bad_words_ids: tuple[tuple[int, ...], ...] = ()
    suppress_tokens: tuple[int, ...] = ()
    forced_bos_token_id: int | None = None
    forced_eos: bool = False
    renormalize_logits: bool = False
    source: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("bad_words_ids", "suppress_tokens", "notes"):  # lists when read from JSON
            value = getattr(self, name)
            if isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
                object.__setattr__(self, name, value)
        _int("num_beams", self.num_beams, 1)
        if self.num_beams > MAX_BEAM:
            raise ConfigError(f"num_beams {self.num_beams} is above the {MAX_BEAM} beams the explorer searches")
        _int("max_length", self.max_length, 2)
        _int("min_length", self.min_length, 0)
        _int("no_repeat_ngram_size", self.no_repeat_ngram_size, 0)
        if isinstance(self.length_penalty, bool) or not isinstance(self.length_penalty, (int, float)) or \
                not -MAX_LENGTH_PENALTY <= self.length_penalty <= MAX_LENGTH_PENALTY:
            raise ConfigError(f"length_penalty must be a number from {-MAX_LENGTH_PENALTY:g} to "
                              f"{MAX_LENGTH_PENALTY:g}, got {self.length_penalty!r}")
        if not (isinstance(self.early_stopping, bool) or self.early_stopping == "never"):
            raise ConfigError(f"early_stopping must be true, false or \"never\", got {self.early_stopping!r}")
        if not all(isinstance(seq, tuple) and seq and all(_is_id(i) for i in seq) for seq in self.bad_words_ids):
            raise ConfigError("bad_words_ids must be a list of non-empty lists of token ids, got "
                              f"{self.bad_words_ids!r}")
        if not all(_is_id(i) for i in self.suppress_tokens):
            raise ConfigError(f"suppress_tokens must be a list of token ids, got {self.suppress_tokens!r}")
        if self.forced_bos_token_id is not None and not _is_id(self.forced_bos_token_id):
            raise ConfigError(f"forced_bos_token_id must be a token id, got {self.forced_bos_token_id!r}")
        for name in ("forced_eos", "renormalize_logits"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")

    def check_ids(self, config: ModelConfig) -> None:
        """Every id it names is in the model's vocabulary."""
        ids = [i for seq in self.bad_words_ids for i in seq] + list(self.suppress_tokens) + (
            [self.forced_bos_token_id] if self.forced_bos_token_id is not None else [])
        wrong = sorted({i for i in ids if i >= config.vocab_size})
        if wrong:
            raise ConfigError(f"token ids {wrong[:5]} are outside the vocabulary of {config.vocab_size}")

    def max_new_tokens(self, config: ModelConfig) -> int:
        """How many tokens a search may generate: ``max_length - 1``, within the positions the model has."""
        return min(self.max_length - 1, config.max_positions)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (lists for tuples)."""
        data = dataclasses.asdict(self)
        data["bad_words_ids"] = [list(seq) for seq in self.bad_words_ids]
        for name in ("suppress_tokens", "notes"):
            data[name] = list(data[name])
        return data


def _is_id(value: object) -> bool:
    return is_int(value, 0)


def _int(name: str, value: object, low: int) -> None:
    check_int(name, value, low, message=f"{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class ModelGeneration:
    """A model's default rule and its transformers settings (``generation.json``).

    :ivar rule: "project" or "transformers": how the model searches unless told otherwise
    :ivar transformers: the settings transformers' rule uses
    """

    rule: str = "project"
    transformers: HFGeneration = HFGeneration()

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ConfigError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}")

    def to_json(self) -> str:
        """The ``generation.json`` text."""
        return json.dumps({"rule": self.rule, "transformers": self.transformers.to_dict()}, indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: object, source: str) -> ModelGeneration:
        """The settings of a ``generation.json``'s data; anything else raises `GenerationError` naming `source`."""
        if not isinstance(data, dict) or set(data) != {"rule", "transformers"} or \
                not isinstance(data["transformers"], dict):
            raise GenerationError(f"{source}: expected {{\"rule\": ..., \"transformers\": {{...}}}}")
        known = {f.name for f in dataclasses.fields(HFGeneration)}
        unknown = sorted(set(data["transformers"]) - known)
        if unknown:
            raise GenerationError(f"{source}: unknown transformers setting(s) {', '.join(unknown)}")
        try:
            return cls(data["rule"], HFGeneration(**data["transformers"]))
        except ConfigError as err:
            raise GenerationError(f"{source}: {err}") from None


def export_generation(config: ModelConfig) -> HFGeneration:
    """The transformers settings of one of this project's models: what ``export-hf`` writes (as opus-mt's folders
    do: beam 4, the pad id banned, ``</s>`` forced at the limit, the limit at the model's positions)."""
    return HFGeneration(num_beams=PROJECT_BEAM, max_length=config.max_positions, bad_words_ids=((config.pad_id,),),
                        forced_eos=True, source="viz-model export-hf")


def load_generation(directory: Path, config: ModelConfig) -> ModelGeneration:
    """The directory's ``generation.json`` (read under the checks every model file gets), else this project's
    rule with the settings ``export-hf`` would write."""
    data = optional_json(directory, GENERATION, MAX_GENERATION_BYTES, GenerationError)
    if data is None:
        return ModelGeneration("project", export_generation(config))
    generation = ModelGeneration.from_dict(data, str(directory / GENERATION))
    try:
        generation.transformers.check_ids(config)
    except ConfigError as err:
        raise GenerationError(f"{directory / GENERATION}: {err}") from None
    return generation


@dataclass(frozen=True)
class Search:
    """One search's settings: the beam, the length penalty's exponent (GNMT's alpha, or transformers'
    ``length_penalty``) and, for transformers' rule, its other settings (`hf`; None: this project's rule).

    :ivar beam: the beam width (1: greedy)
    :ivar alpha: the length penalty's exponent
    :ivar hf: transformers' settings, None for this project's rule
    """

    beam: int = PROJECT_BEAM
    alpha: float = PROJECT_ALPHA
    hf: HFGeneration | None = None

    @property
    def rule(self) -> str:
        """"project" or "transformers"."""
        return "project" if self.hf is None else "transformers"


# --- reading a Hugging Face folder's settings, as transformers 5 reads them ------------------------------------------
def read_hf_generation(folder: Path, hf_config: dict[str, Any], config: ModelConfig) -> HFGeneration:
    """transformers' generation settings of `folder`: generation_config.json when the folder has one, else the
    generation keys of config.json (`hf_config`), with transformers' defaults for what neither sets; lengths
    resolved as ``generate`` resolves them. Settings this project does not implement are kept as `notes`."""
    path = folder / "generation_config.json"
    if path.is_file():
        settings = _read_json(path)
        if not isinstance(settings, dict):
            raise GenerationError(f"{path}: expected a JSON object of generation settings")
        unknown = sorted(k for k in settings if k not in GENERATION_KEYS)
    else:
        path, settings = folder / "config.json", {k: v for k, v in hf_config.items() if k in GENERATION_KEYS}
        unknown = []
    settings = {k: v for k, v in settings.items() if v is not None}  # None: transformers' default

    def fail(message: str) -> GenerationError:
        return GenerationError(f"{path}: {message}")

    eos = settings.get("eos_token_id", config.eos_id)
    if eos not in (config.eos_id, [config.eos_id]):
        raise fail(f"eos_token_id {eos!r} is not the model's </s> ({config.eos_id}); only one </s> is supported")
    start = settings.get("decoder_start_token_id", config.bos_id)
    if start != config.bos_id:
        raise fail(f"decoder_start_token_id {start!r} differs from config.json's ({config.bos_id})")
    forced_eos = settings.get("forced_eos_token_id")
    if forced_eos not in (None, config.eos_id, [config.eos_id]):
        raise fail(f"forced_eos_token_id {forced_eos!r} is not eos_token_id {config.eos_id}; only </s> can be forced "
                   "at the length limit")
    notes = [f"{key} {settings[key]!r}: not implemented; {what}" for key, what in _unimplemented(settings)]
    notes += [f"{key}: not a transformers generation setting; transformers ignores it too" for key in unknown]
    max_length, min_length = _lengths(settings, hf_config, fail)
    if max_length - 1 > config.max_positions:
        notes.append(f"max_length {max_length}: more than the {config.max_positions} positions the model has (where "
                     f"transformers would fail); at most {config.max_positions} tokens are generated")
    bad_words = settings.get("bad_words_ids", [])
    if not isinstance(bad_words, list) or not all(isinstance(seq, list) for seq in bad_words):
        raise fail(f"bad_words_ids must be a list of lists of token ids, got {bad_words!r}")
    # as transformers: a bad word that is </s> alone is dropped (</s> is never banned this way)
    bad_words = [seq for seq in bad_words if seq != [config.eos_id]]
    try:
        generation = HFGeneration(
            num_beams=settings.get("num_beams", 1), length_penalty=settings.get("length_penalty", 1.0),
            early_stopping=settings.get("early_stopping", False), max_length=max_length, min_length=min_length,
            no_repeat_ngram_size=settings.get("no_repeat_ngram_size", 0),
            bad_words_ids=tuple(tuple(seq) for seq in bad_words),
            suppress_tokens=tuple(settings.get("suppress_tokens", ())),
            forced_bos_token_id=settings.get("forced_bos_token_id"), forced_eos=forced_eos is not None,
            renormalize_logits=settings.get("renormalize_logits", False), source=path.name, notes=tuple(notes))
        generation.check_ids(config)
    except (ConfigError, TypeError) as err:
        raise fail(str(err)) from None
    return generation


def _read_json(path: Path) -> object:
    if path.stat().st_size > MAX_GENERATION_BYTES:
        raise GenerationError(f"{path}: larger than {MAX_GENERATION_BYTES:,} bytes; not a generation config")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:
        raise GenerationError(f"{path}: not valid JSON ({err})") from None


def _unimplemented(settings: dict[str, Any]) -> list[tuple[str, str]]:
    """The settings transformers would act on that this project's search does not, with what it does instead."""
    found = []
    if settings.get("do_sample", False) is not False:
        found.append(("do_sample", "a deterministic beam search (num_beams) is used instead of sampling"))
    for key, neutral in NEUTRAL.items():
        if key in settings and settings[key] != neutral:
            found.append((key, f"the search runs as if it were {json.dumps(neutral)}"))
    return found


def _lengths(settings: dict[str, Any], hf_config: dict[str, Any], fail) -> tuple[int, int]:
    """max_length and min_length as ``generate`` resolves them for an encoder-decoder (one start token)."""
    for key in ("max_length", "max_new_tokens", "min_length", "min_new_tokens"):
        value = settings.get(key)
        if value is not None and not is_int(value, 0):
            raise fail(f"{key} must be a whole number >= 0, got {value!r}")
    if settings.get("max_new_tokens") is not None:
        max_length = settings["max_new_tokens"] + 1
    elif settings.get("max_length") is not None:
        max_length = settings["max_length"]
    else:  # transformers' default: 20 new tokens, within the model's positions
        max_length = TRANSFORMERS_MAX_LENGTH + 1
        positions = hf_config.get("max_position_embeddings")
        if isinstance(positions, int):
            max_length = min(max_length, positions)
    if max_length < 2:
        raise fail(f"max_length {max_length} leaves no room for a token after the start token")
    if settings.get("min_new_tokens") is not None:
        min_length = settings["min_new_tokens"] + 1
    else:
        min_length = settings.get("min_length", 0)
    return max_length, min_length
