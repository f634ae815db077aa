"""Cross-attention as word alignment: pieces merged into words, links per head and per layer, Pharaoh files, AER.

Words are the ``▁``-delimited groups of `viz_model.tokenization.tokenizer.word_ids` (the whitespace-separated tokens of
the
text; give pre-tokenized text such as ``snow .`` when the gold alignments split punctuation off). The special
tokens ``<s>`` / ``</s>`` belong to no word. A word-level map sums the weight over a source word's pieces (the mass
the query puts on that word) and averages the rows of a target word's pieces (each row is one distribution, so the
mean stays one); its rows therefore sum to 1 minus the weight on ``</s>``.

Which row stands for a target word: ``rows="output"`` (default) takes the queries that *predicted* the word's
pieces (row t predicted ``output_tokens[t]``); ``rows="input"`` takes the queries that *read* them
(``target_tokens[t]``), the shifted variant that Chen et al. (2020) found to align better.

Links are ``(source word, target word)`` pairs, 0-based, written in Pharaoh format as ``i-j``. Gold files may mark
possible links as ``i?j`` or ``i-j-P`` (``i-j-S`` = sure); the sure links S are always counted as possible too
(S is a subset of P). ``AER = 1 - (|A & S| + |A & P|) / (|A| + |S|)`` (Och & Ney, 2003), summed over a corpus.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from ..config.checks import check_int
from ..data.textfiles import open_text
from ..kinds.translator import TranslationModel
from ..tokenization.tokenizer import WORD_START, word_ids
from .corpus_attention import iter_attentions
from .head_stats import SPECIAL_TOKENS
from .inputs import require_cross_attention

Link = tuple[int, int]  # (source word, target word)
ROW_CHOICES = ("output", "input")
_LINK = re.compile(r"^(\d+)(-|\?)(\d+)(?:-([SsPp]))?$")


class CrossRecord(Protocol):
    """What alignment reads from one sentence: `AttentionTrace` and `corpus.SentenceAttention` both fit."""

    source_tokens: list[str]
    target_tokens: list[str]
    output_tokens: list[str]
    cross_attentions: list[np.ndarray]


@dataclass
class WordAttention:
    """A word-level attention map ``(..., target_words, source_words)`` with the words' texts."""

    weights: np.ndarray
    source_words: list[str]
    target_words: list[str]


@dataclass(frozen=True)
class Alignment:
    """A gold alignment: sure links and possible links (possible always includes sure).

    :ivar sure: ``(source word, target word)`` links, 0-based
    :ivar possible: the links that may be there, the sure ones included
    """

    sure: frozenset[Link] = frozenset()
    possible: frozenset[Link] = field(default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "possible", frozenset(self.possible) | frozenset(self.sure))


def word_groups(pieces: Sequence[str]) -> tuple[list[list[int]], list[str]]:
    """The piece positions of each word (special tokens left out) and each word's text (pieces joined, no ``▁``)."""
    groups: dict[int, list[int]] = {}
    for position, (piece, word) in enumerate(zip(pieces, word_ids(list(pieces)))):
        if piece not in SPECIAL_TOKENS:
            groups.setdefault(word, []).append(position)
    positions = list(groups.values())
    texts = ["".join(pieces[p] for p in group).replace(WORD_START, " ").strip() for group in positions]
    return positions, texts


def word_attention(cross: np.ndarray, source_tokens: Sequence[str], target_tokens: Sequence[str]) -> WordAttention:
    """Merge a piece-level map ``(..., target_len, source_len)`` into words: sum over source pieces, mean over
    target pieces (see the module docstring). `target_tokens` label the rows."""
    w = np.asarray(cross, dtype=np.float64)
    if w.ndim < 2 or w.shape[-2:] != (len(target_tokens), len(source_tokens)):
        raise ValueError(f"a cross-attention map of shape {w.shape} does not fit {len(target_tokens)} target x "
                         f"{len(source_tokens)} source tokens")
    src_groups, src_words = word_groups(source_tokens)
    tgt_groups, tgt_words = word_groups(target_tokens)
    to_source = np.zeros((len(source_tokens), len(src_groups)))
    for word, group in enumerate(src_groups):
        to_source[group, word] = 1.0
    from_target = np.zeros((len(tgt_groups), len(target_tokens)))
    for word, group in enumerate(tgt_groups):
        from_target[word, group] = 1.0 / len(group)
    return WordAttention(from_target @ w @ to_source, src_words, tgt_words)


def check_rows(rows: str) -> str:
    if rows not in ROW_CHOICES:
        raise ValueError(f"rows must be 'output' (the queries that predicted a word) or 'input' (the queries that "
                         f"read it); got {rows!r}")
    return rows


def layer_word_attention(record: CrossRecord, layer: int, rows: str = "output") -> WordAttention:
    """The word-level maps ``(heads, target_words, source_words)`` of one cross-attention layer of a record."""
    maps = record.cross_attentions
    check_int("layer", layer, 0, len(maps) - 1, error=ValueError,
              message=f"layer must be an integer from 0 to {len(maps) - 1}, got {layer!r}")
    tokens = record.output_tokens if check_rows(rows) == "output" else record.target_tokens
    return word_attention(maps[layer], record.source_tokens, tokens)


def alignment_links(weights: np.ndarray, threshold: float = 0.0) -> set[Link]:
    """Link each target word (row of ``(target_words, source_words)``) to its most attended source word, when that
    weight is at least `threshold` (0: always)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"alignment_links needs one (target_words, source_words) map, got shape {w.shape}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be from 0 to 1, got {threshold!r}")
    if w.shape[1] == 0:
        return set()
    best = w.argmax(axis=1)
    return {(int(i), j) for j, i in enumerate(best) if w[j, i] >= threshold}


def parse_pharaoh(line: str) -> Alignment:
    """One line of links: ``i-j`` (sure), ``i?j`` or ``i-j-P`` (possible), ``i-j-S`` (sure); 0-based indices."""
    sure, possible = set(), set()
    for token in line.split():
        match = _LINK.match(token)
        if not match:
            raise ValueError(f"bad alignment link {token!r}: expected i-j, i?j, i-j-S or i-j-P (0-based word indices)")
        link = (int(match.group(1)), int(match.group(3)))
        is_possible = match.group(2) == "?" or (match.group(4) or "S").upper() == "P"
        (possible if is_possible else sure).add(link)
    return Alignment(frozenset(sure), frozenset(possible))


def format_pharaoh(sure: Iterable[Link], possible: Iterable[Link] = ()) -> str:
    """Links as one Pharaoh line, sorted: sure ones ``i-j``, possible-only ones ``i?j``."""
    sure_set = set(sure)
    marked = [(link, "-") for link in sure_set] + [(link, "?") for link in set(possible) - sure_set]
    return " ".join(f"{i}{mark}{j}" for (i, j), mark in sorted(marked))


def read_pharaoh(path: str | Path) -> list[Alignment]:
    """Every line of a Pharaoh file (plain or .gz) as an `Alignment`; an empty line is a sentence without links."""
    path = Path(path)
    alignments = []
    for number, line in enumerate(open_text(path), 1):
        try:
            alignments.append(parse_pharaoh(line))
        except ValueError as err:
            raise ValueError(f"{path} line {number}: {err}") from None
    if not alignments:
        raise ValueError(f"{path} is empty")
    return alignments


def aer_counts(predicted: set[Link], gold: Alignment) -> np.ndarray:
    """``[|A|, |S|, |A & S|, |A & P|]`` of one sentence (sum them over a corpus)."""
    return np.array([len(predicted), len(gold.sure), len(predicted & gold.sure), len(predicted & gold.possible)])


def aer_from_counts(counts: np.ndarray) -> float:
    """AER from summed `aer_counts`; NaN when there are neither predicted nor sure links."""
    predicted, sure, a_and_s, a_and_p = counts
    return float("nan") if predicted + sure == 0 else 1.0 - (a_and_s + a_and_p) / (predicted + sure)


def alignment_error_rate(predicted: Sequence[set[Link]], gold: Sequence[Alignment]) -> float:
    """Corpus AER of predicted link sets against gold alignments, sentence by sentence."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones")
    return aer_from_counts(sum((aer_counts(a, g) for a, g in zip(predicted, gold)), np.zeros(4, dtype=np.int64)))


def check_gold_fits(gold: Alignment, sentence: int, source_words: int, target_words: int) -> None:
    for i, j in gold.possible:
        if i >= source_words or j >= target_words:
            raise ValueError(f"sentence {sentence + 1}: gold link {i}-{j} is outside its {source_words} source x "
                             f"{target_words} target words; tokenize the text as the gold alignment does")


def attention_aer(records: Iterable[CrossRecord], gold: Sequence[Alignment], rows: str = "output",
                  threshold: float = 0.0) -> pd.DataFrame:
    """AER, precision and recall of the links of every cross-attention head and of each layer's head average.

    `records` are traces or `corpus.SentenceAttention` teacher-forced on the gold alignments' target sentences;
    a record's ``index`` (else its position) picks its gold line. Columns: layer, head (``<NA>`` = the layer's mean
    over heads), aer, precision (|A & P| / |A|), recall (|A & S| / |S|), links (|A|).
    """
    counts: dict[tuple[int, int | None], np.ndarray] = {}
    seen = 0
    for position, record in enumerate(records):
        if not record.cross_attentions:
            raise ValueError("attention_aer (word alignment) does not apply to a language model (decoder-only): "
                             "its records have no cross-attention")
        index = getattr(record, "index", position)
        if not 0 <= index < len(gold):
            raise ValueError(f"sentence {index + 1} has no gold alignment ({len(gold)} given)")
        seen += 1
        for layer in range(len(record.cross_attentions)):
            words = layer_word_attention(record, layer, rows)
            check_gold_fits(gold[index], index, len(words.source_words), len(words.target_words))
            maps = [(head, words.weights[head]) for head in range(words.weights.shape[0])]
            for head, weights in [*maps, (None, words.weights.mean(axis=0))]:
                links = alignment_links(weights, threshold)
                counts[(layer, head)] = counts.get((layer, head), 0) + aer_counts(links, gold[index])
    if seen != len(gold):
        raise ValueError(f"{seen} sentences but {len(gold)} gold alignments")
    rows_out = []
    for (layer, head), (a, s, a_s, a_p) in counts.items():
        rows_out.append({"layer": layer, "head": head, "aer": aer_from_counts(np.array([a, s, a_s, a_p])),
                         "precision": a_p / a if a else float("nan"), "recall": a_s / s if s else float("nan"),
                         "links": int(a)})
    table = pd.DataFrame(rows_out, columns=["layer", "head", "aer", "precision", "recall", "links"])
    table["head"] = table["head"].astype("Int64")
    return table.sort_values(["layer", "head"], na_position="last", ignore_index=True)


def corpus_aer(model: TranslationModel, sources: Sequence[str], references: Sequence[str],
               gold: Sequence[Alignment], rows: str = "output", threshold: float = 0.0, progress: bool = False
               ) -> pd.DataFrame:
    """`attention_aer` of `model` teacher-forced on `references` (the gold alignments' target side)."""
    require_cross_attention(model, "corpus_aer (word alignment)")
    check_rows(rows)
    if len(gold) != len(sources):
        raise ValueError(f"{len(sources)} source sentences but {len(gold)} gold alignments")
    return attention_aer(iter_attentions(model, sources, references, progress=progress), gold, rows, threshold)
