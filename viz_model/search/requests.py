"""The checks of what a person asks a model to translate: the text, the search settings, the lengths, a task
prefix; each error a `ValueError` that says why (`TooLong` for a length)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..config import ModelConfig
from ..config.checks import check_int, is_int
from ..data.typed_text import check_text
from .batched import encode_source, source_end
from .settings import MAX_BEAM, MAX_LENGTH_PENALTY, PROJECT_ALPHA, PROJECT_BEAM, RULES, ModelGeneration, Search

MAX_TASK_PREFIX_CHARS = 200
"""The longest task prefix `TranslationModel.with_task_prefix` takes (T5's run to ~30 characters)."""
MAX_TOP_K = 50


def check_decoding(beam: object, alpha: object, top_k: object = 5, rule: str = "project") -> tuple[int, float, int]:
    """Checked search settings; `alpha` is GNMT's exponent (0 to 5) by this project's rule, transformers'
    length_penalty (-5 to 5: negative values favour short outputs) by its rule."""
    check_int("beam", beam, 1, MAX_BEAM, error=ValueError,
              message=f"beam must be an integer from 1 to {MAX_BEAM}, got {beam!r}")
    low = -MAX_LENGTH_PENALTY if rule == "transformers" else 0.0
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) \
            or not low <= alpha <= MAX_LENGTH_PENALTY:
        raise ValueError(f"alpha (length penalty) must be a number from {low:g} to 5, got {alpha!r}")
    check_int("top_k", top_k, 1, MAX_TOP_K, error=ValueError,
              message=f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    return beam, float(alpha), top_k  # type: ignore[return-value]


def search_settings(generation: ModelGeneration, rule: str | None = None, beam: int | None = None,
                    alpha: float | None = None) -> Search:
    """The settings of one search, checked: `rule` "project" or "transformers" (default: the model's own, its
    `generation`'s), `beam` and `alpha` (default: the rule's: beam 4 and alpha 0.6 by this project's rule, the
    generation config's num_beams and length_penalty by transformers')."""
    rule = generation.rule if rule is None else rule
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    hf = generation.transformers if rule == "transformers" else None
    beam = (hf.num_beams if hf else PROJECT_BEAM) if beam is None else beam
    alpha = (hf.length_penalty if hf else PROJECT_ALPHA) if alpha is None else alpha
    beam, alpha, _ = check_decoding(beam, alpha, rule=rule)
    return Search(beam, alpha, hf)


def check_positions_flag(positions: object) -> bool:
    if not isinstance(positions, bool):
        raise ValueError(f"positions must be True or False, got {positions!r}")
    return positions


def check_task_prefix(prefix: object) -> str:
    """A T5-family model's task prefix: one line of text, at most `MAX_TASK_PREFIX_CHARS` ("" is the text as
    given)."""
    if not isinstance(prefix, str):
        raise ValueError(f"the task prefix must be a string, got {type(prefix).__name__}")
    if len(prefix) > MAX_TASK_PREFIX_CHARS:
        raise ValueError(f"the task prefix has {len(prefix)} characters; the limit is {MAX_TASK_PREFIX_CHARS}")
    if "\n" in prefix or "\r" in prefix:
        raise ValueError("the task prefix is one line: remove its line breaks")
    if prefix.strip():  # its characters as a sentence's (an empty prefix is the text as given)
        check_text(prefix, "the task prefix")
    return prefix


class TooLong(ValueError):
    """A text longer than the model reads: `tokens` of it (pieces + </s>), `limit` at most; `side` "source" or
    "target"."""

    def __init__(self, message: str, side: str, tokens: int, limit: int) -> None:
        super().__init__(message)
        self.side, self.tokens, self.limit = side, tokens, limit


@dataclass(frozen=True)
class Request:
    """A checked translation request: the source ids (pieces + </s>) and, when forced, the output ids (+ </s>)."""

    source_ids: list[int]
    forced_ids: list[int] | None = None


def source_ids(tokenizer: Any, config: ModelConfig, text: str, truncate: bool = False, what: str = "text"
               ) -> list[int]:
    """Source ids (pieces + ``</s>``, and the source language's code after it where the tokenizer puts it there:
    the original mBART's); too long is a `TooLong` naming the limit, unless `truncate` (the pieces are cut, the
    end kept); `what` names the text in errors."""
    ids = encode_source(tokenizer, check_text(text, what))
    end = source_end(tokenizer)
    limit = config.max_positions
    if len(ids) > limit:
        if not truncate:
            raise TooLong(f"the text is {len(ids)} tokens long; this model reads at most {limit} "
                          "(max_positions). Shorten it or pass truncate=True", "source", len(ids), limit)
        ids = ids[:limit - len(end)] + end
    return ids


def request(tokenizer: Any, config: ModelConfig, text: str, target: str | None = None, truncate: bool = False,
            names: tuple[str, str] = ("text", "target")) -> Request:
    """The one check of a translation request: both texts are text, and fit the model; errors are `ValueError`s
    that say why (`TooLong` for a length), naming the texts by `names`."""
    ids = source_ids(tokenizer, config, text, truncate, names[0])
    if target is None:
        return Request(ids)
    forced = tokenizer.encode_target(check_text(target, names[1])) + [config.eos_id]
    limit = config.max_positions
    if len(forced) > limit:
        raise TooLong(f"the target is {len(forced)} tokens long; this model reads at most {limit} "
                      "(max_positions)", "target", len(forced), limit)
    return Request(ids, forced)


def forced_output_ids(config: ModelConfig, ids: object) -> list[int]:
    """Forced output ids: integers of the vocabulary, ``</s>`` appended if missing, within max_positions."""
    vocab = config.vocab_size
    if not isinstance(ids, (list, tuple)) or not ids or not all(is_int(i, 0, vocab - 1) for i in ids):
        raise ValueError(f"forced_ids must be a non-empty list of piece ids from 0 to {vocab - 1}")
    out = list(ids) if ids[-1] == config.eos_id else [*ids, config.eos_id]
    if len(out) > config.max_positions:
        raise ValueError(f"the target is {len(out)} tokens long; this model reads at most "
                         f"{config.max_positions} (max_positions)")
    return out
