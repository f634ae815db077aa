"""The connected held-out split (issue 24): no normalised source or reference of val or test appears on either side
of training, where the old rule (exact English text) leaked paraphrases, punctuation variants and shared German."""

from __future__ import annotations

import random

import pytest

from viz_model.config import ConfigError, CorpusConfig
from viz_model.data.textfiles import DataError
from viz_model.train.splits import (
    HOLDOUT_RULES,
    connected_holdout_split,
    holdout_split,
    normalised,
    unseen_test_sentences,
)

WORDS = ["tom", "mary", "likes", "sees", "the", "cat", "dog", "house", "is", "big", "small", "red", "green", "runs"]
WÖRTER = ["tom", "maria", "mag", "sieht", "die", "katze", "den", "hund", "das", "haus", "ist", "groß", "klein", "rot"]


def corpus(count: int = 1500, seed: int = 0) -> tuple[list[str], list[str]]:
    """Tatoeba-like pairs: many sentences appear again with other case or punctuation, or share a translation."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(count):
        n = rng.randint(2, 5)
        en = " ".join(rng.choice(WORDS) for _ in range(n))
        de = " ".join(rng.choice(WÖRTER) for _ in range(n))
        for _ in range(rng.choice([1, 1, 2, 3])):  # variants: "That's right." / "that's right!" / another German
            src.append(rng.choice([en.capitalize() + ".", en + "!", en.upper() + "?", en + " ."]))
            tgt.append(rng.choice([de.capitalize() + ".", de + "!", " ".join(rng.choice(WÖRTER) for _ in range(n))]))
    return src, tgt


def leaks(split) -> set[str]:
    """Normalised val/test sources and references that also stand on either side of training."""
    training = {normalised(t) for t in split.train_src + split.train_tgt}
    held = [*split.val_src, *split.test_src] + [r for refs in split.val_refs + split.test_refs for r in refs]
    return {normalised(t) for t in held} & training


def test_no_held_out_source_or_reference_appears_in_training():
    src, tgt = corpus()
    split = connected_holdout_split(src, tgt, 60, 60, 7)
    assert leaks(split) == set()
    assert len(split.val_src) >= 60 and len(split.test_src) >= 60
    assert len(split.train_src) + sum(map(len, split.val_refs + split.test_refs)) == len(src)  # nothing lost
    assert connected_holdout_split(src, tgt, 60, 60, 7) == split  # the same seed gives the same sets
    assert connected_holdout_split(src, tgt, 60, 60, 8) != split


def test_the_old_rule_leaks_on_the_same_data_and_unseen_sentences_filter_it():
    src, tgt = corpus()
    old = holdout_split(src, tgt, 60, 60, 7)
    assert leaks(old), "the corpus should have variants that the old rule leaves in training"
    keep = unseen_test_sentences(old)
    training = {normalised(t) for t in old.train_src + old.train_tgt}
    assert 0 < len(keep) < len(old.test_src)
    for i in keep:
        assert normalised(old.test_src[i]) not in training
        assert not {normalised(r) for r in old.test_refs[i]} & training
    dropped = set(range(len(old.test_src))) - set(keep)
    assert all(normalised(old.test_src[i]) in training or {normalised(r) for r in old.test_refs[i]} & training
               for i in dropped)


def test_normalisation_ignores_case_punctuation_and_whitespace():
    assert normalised("That's right!") == normalised("that's  right.") == normalised(" THAT'S RIGHT ")
    assert normalised("Ja.") == normalised("ja")
    assert normalised("Tom ist groß.") != normalised("Tom ist klein.")


def test_too_large_a_holdout_is_a_clear_error():
    src, tgt = corpus(100)
    with pytest.raises(DataError, match="lower holdout_val"):
        connected_holdout_split(src, tgt, 500, 500, 0)


def test_the_rule_is_a_corpus_setting_whose_default_keeps_old_runs():
    assert set(HOLDOUT_RULES) == {"source", "connected"}
    old = CorpusConfig("tatoeba", "data", holdout="pairs")
    assert old.holdout_rule == "source" and "holdout_rule" not in old.to_dict()
    new = CorpusConfig("tatoeba", "data", holdout="pairs", holdout_rule="connected")
    assert new.to_dict()["holdout_rule"] == "connected"
    with pytest.raises(ConfigError, match="holdout_rule"):
        CorpusConfig("tatoeba", "data", holdout="pairs", holdout_rule="words")
