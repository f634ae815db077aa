"""What a model was trained on, and whether an input is within its reach.

A model directory may hold ``training_stats.json`` (written by `viz-model export`): the corpora (domains) it was
trained on, how often each source-side piece occurred in training, and how long the training sources were. With
it, `assess_input` flags input the model has little chance with: characters the tokenizer never saw (``<unk>``),
pieces seen only a handful of times in training, and sentences longer than any it was trained on. Without the file
only unknown characters can be flagged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..tokenization.tokenizer import EOS_ID, WORD_START, Tokenizer, word_ids
from .checkpoint import optional_json

TRAINING_STATS = "training_stats.json"
MAX_STATS_BYTES = 64 * 2**20
RARE_COUNT = 5  # a source piece seen fewer times than this in training is "rare"
RARE_SHARE = 0.25  # more than this share of rare pieces: the input is flagged
DOMAINS = {  # what each of our corpora is, for people (a corpus not listed is described by its name)
    "multi30k": "image captions",
    "tatoeba": "everyday sentences",
    "wmt": "news",
}


class StatsError(ValueError):
    """A training_stats.json that cannot be used; the message names the file."""


@dataclass
class CorpusStats:
    """One training corpus: its name, what kind of text it holds, how many sentence pairs were trained on."""

    name: str
    domain: str
    sentences: int


@dataclass
class TrainingStats:
    """Source-side statistics of a model's training data (see the module docstring)."""

    corpora: list[CorpusStats]
    piece_counts: list[int]  # index = piece id: occurrences in the training sources
    max_source_tokens: int  # longest training source, pieces + </s>
    p99_source_tokens: int

    @property
    def domains(self) -> list[str]:
        return list(dict.fromkeys(c.domain for c in self.corpora))

    @property
    def sentences(self) -> int:
        return sum(c.sentences for c in self.corpora)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":")) + "\n"

    @classmethod
    def from_dict(cls, data: object, where: str = TRAINING_STATS) -> TrainingStats:
        try:
            corpora = [CorpusStats(str(c["name"]), str(c["domain"]), int(c["sentences"])) for c in data["corpora"]]
            counts = [int(c) for c in data["piece_counts"]]
            stats = cls(corpora, counts, int(data["max_source_tokens"]), int(data["p99_source_tokens"]))
        except (KeyError, TypeError, ValueError) as err:
            raise StatsError(f"{where}: not a training statistics file ({type(err).__name__}: {err})") from None
        if not corpora or any(c < 0 for c in counts) or stats.max_source_tokens < 1:
            raise StatsError(f"{where}: empty corpus list, a negative count or no source length")
        return stats


def describe_corpus(name: str) -> str:
    return DOMAINS.get(name.lower(), name)


def training_stats(tokenizer: Tokenizer, sources: dict[str, Sequence[str]]) -> TrainingStats:
    """Statistics of the training sources, given per corpus name (each list as trained on, without duplicates
    from sampling weights)."""
    counts = np.zeros(tokenizer.vocab_size, dtype=np.int64)
    lengths: list[int] = []
    corpora = []
    for name, texts in sources.items():
        if not texts:
            continue
        encoded = tokenizer.encode_batch(list(texts))
        for ids in encoded:
            np.add.at(counts, ids, 1)
            lengths.append(len(ids) + 1)  # + </s>
        corpora.append(CorpusStats(name, describe_corpus(name), len(texts)))
    if not lengths:
        raise ValueError("training_stats needs at least one non-empty corpus")
    counts[EOS_ID] += len(lengths)
    return TrainingStats(corpora, counts.tolist(), max(lengths), int(np.percentile(lengths, 99)))


def load_training_stats(directory: str | Path) -> TrainingStats | None:
    """The model directory's statistics, None when it has none; a broken file is a `StatsError` naming it."""
    data = optional_json(directory, TRAINING_STATS, MAX_STATS_BYTES, StatsError)
    return None if data is None else TrainingStats.from_dict(data, str(Path(directory) / TRAINING_STATS))


@dataclass
class InputAssessment:
    """How far an input is from what the model was trained on; `warnings` say it in sentences."""

    tokens: int  # pieces + </s>
    unknown: list[str] = field(default_factory=list)  # characters the tokenizer maps to <unk>
    rare: list[str] = field(default_factory=list)  # pieces seen fewer than RARE_COUNT times in training
    rare_share: float = 0.0
    longest_trained: int | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def out_of_reach(self) -> bool:
        return bool(self.warnings)


UNKNOWN_SHOWN = 10  # unknown characters a warning lists by name; the rest it counts


def unknown_characters(tokenizer: Tokenizer, text: str) -> list[str]:
    """The characters of `text` that only encode to ``<unk>`` (in order of first appearance)."""
    seen = dict.fromkeys(c for c in text if not c.isspace())
    return [c for c in seen if tokenizer.unk_id in tokenizer.encode(c)]


def assess_input(tokenizer: Tokenizer, text: str, stats: TrainingStats | None) -> InputAssessment:
    """Flag input beyond the model's reach: unknown characters, many rare pieces, longer than any training source."""
    ids = tokenizer.encode(text)
    result = InputAssessment(tokens=len(ids) + 1)
    if tokenizer.unk_id in ids:
        result.unknown = unknown_characters(tokenizer, text)
        shown = " ".join(result.unknown[:UNKNOWN_SHOWN]) or "?"
        more = len(result.unknown) - UNKNOWN_SHOWN
        shown += f" and {more} more" if more > 0 else ""
        result.warnings.append(f"{len(result.unknown) or 'Some'} character(s) the model has never seen ({shown}): "
                               "they reach it as <unk> (unknown) and cannot be translated.")
    if stats is None:
        return result
    counts = stats.piece_counts
    content = [i for i in ids if i != tokenizer.unk_id and tokenizer.piece(i) != WORD_START]
    rare_ids = [i for i in content if i >= len(counts) or counts[i] < RARE_COUNT]
    result.rare = list(dict.fromkeys(tokenizer.piece(i) for i in rare_ids))
    result.rare_share = len(rare_ids) / len(content) if content else 0.0
    result.longest_trained = stats.max_source_tokens
    if rare_ids and result.rare_share > RARE_SHARE:
        result.warnings.append(
            f"{len(rare_ids)} of its {len(content)} pieces were rare or absent in the training data (seen fewer than "
            f"{RARE_COUNT} times: {' '.join(result.rare[:10])}): words the model has barely met.")
    if result.tokens > stats.max_source_tokens:
        result.warnings.append(f"It is {result.tokens} tokens long; the longest training sentence had "
                               f"{stats.max_source_tokens}.")
    return result


@dataclass
class WordConfidence:
    """One output word: its text (pieces joined) and the lowest probability among its pieces."""

    text: str
    probability: float


def word_confidences(pieces: Sequence[str], probabilities: Sequence[float]) -> list[WordConfidence]:
    """Output pieces merged into words, each with the probability of its least likely piece (so one unsure piece
    marks the whole word); special tokens such as ``</s>`` are words of their own."""
    if len(pieces) != len(probabilities):
        raise ValueError(f"{len(pieces)} pieces but {len(probabilities)} probabilities")
    words: list[WordConfidence] = []
    for piece, word, probability in zip(pieces, word_ids(list(pieces)), probabilities):
        if word == len(words):
            words.append(WordConfidence(piece.replace(WORD_START, ""), float(probability)))
        else:
            words[-1].text += piece.replace(WORD_START, "")
            words[-1].probability = min(words[-1].probability, float(probability))
    return words
