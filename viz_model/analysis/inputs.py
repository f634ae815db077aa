"""Checks and tokenization of user-given sentence lists, shared by every corpus-level analysis.

Errors are `ValueError`s that name the sentence at fault (1-based, like a line number).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..config.checks import check_int
from ..data.typed_text import check_text
from ..kinds.base import ModelKind
from ..kinds.translator import TranslationModel


def require_cross_attention(model: ModelKind, method: str, reason: str = "reads cross-attention, which a "
                            "decoder-only model has none of") -> None:
    """One line naming `method` and the model's kind where `model` has no cross-attention (no source read by an
    encoder and an output that reads it), which `method` needs."""
    if "cross" not in model.attention_kinds:
        raise ValueError(f"{method} does not apply to {model.description}: it {reason}")


def check_limit(limit: object) -> int | None:
    """None (no limit) or an integer >= 1."""
    return None if limit is None else check_int("limit", limit, 1, error=ValueError, message="limit must be an "
                                                f"integer >= 1 (or None for all sentences), got {limit!r}")


def _check_list(texts: object, what: str) -> list[str]:
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):
        raise ValueError(f"{what} must be a list of sentences, got {type(texts).__name__}")
    return list(texts)


def check_corpus(sources: Iterable[str], references: Iterable[str] | None = None, limit: int | None = None,
                 names: tuple[str, str] = ("source sentence", "reference")) -> tuple[list[str], list[str] | None]:
    """The first `limit` sources (and their references), each checked with `check_text`; the lists must align.

    An error names the sentence as ``f"{names[0]} {i}"`` (or ``names[1]`` for a reference), i counted from 1.
    """
    limit = check_limit(limit)
    src = _check_list(sources, "sources")
    if not src:
        raise ValueError("no source sentences given")
    refs = None if references is None else _check_list(references, "references")
    if refs is not None and len(refs) != len(src):
        raise ValueError(f"{len(src)} source sentences but {len(refs)} references: the lists must align")
    src = src[:limit]
    for i, text in enumerate(src, 1):
        check_text(text, f"{names[0]} {i}")
    if refs is not None:
        refs = refs[:limit]
        for i, text in enumerate(refs, 1):
            check_text(text, f"{names[1]} {i}")
    return src, refs


def source_ids(model: TranslationModel, texts: Sequence[str]) -> list[list[int]]:
    """Encoder inputs (pieces + ``</s>``), cut to the model's max_positions as `TranslationModel.encode` does."""
    return [model.encode(text, truncate=True) for text in texts]


def reference_ids(model: TranslationModel, texts: Sequence[str]) -> list[list[int]]:
    """Forced outputs (pieces + ``</s>``), cut so that ``<s>`` + output fit in the model's max_positions."""
    limit = model.config.max_positions
    out = []
    eos = model.config.eos_id
    for ids in model.tokenizer.encode_target_batch(list(texts)):
        ids = ids + [eos]
        out.append(ids if len(ids) <= limit else ids[:limit - 1] + [eos])
    return out
