"""Held-out validation and test sets for a corpus that has no official split (Tatoeba), by distinct source sentence.

Procedure of `holdout_split`, fixed so that every run, machine and reader gets the same sets:

1. Group the pairs by source sentence (compared after collapsing runs of whitespace; case and punctuation count):
   one group is one English sentence with all its German translations. Tatoeba (2018-05-13 export): 169,813 pairs,
   135,534 distinct English sentences, up to 36 translations each.
2. Rank the distinct sentences by the SHA-256 digest of ``f"{seed}\\t{sentence}"`` (UTF-8). This pseudo-random order
   depends only on the seed and the sentence: not on the file's order, numpy/Python versions or the platform.
3. The first `n_val` sentences of that order are the validation set, the next `n_test` the test set; each keeps all
   of its translations as references (in file order), so scores are multi-reference. All other pairs are training
   data, in file order.

No source sentence is in two parts, but that is all this rule ("source", the corpus setting ``holdout_rule``'s
default, so runs made with it rebuild the same sets) guarantees: paraphrases and punctuation variants of a held-out
sentence, and its German translations, may still be training pairs (measured on Tatoeba: 118 of the 1,000 test
sentences have a reference that is also a training target). The "connected" rule (`connected_holdout_split`, for
new runs) holds out whole groups of pairs joined by a shared normalised source or target, so none of that can
happen; `unseen_test_sentences` picks the part of an old test set that passes the new rule.
The seed is the corpus's ``holdout_seed``, by default
`viz_model.config.HOLDOUT_SEED` = 20180513 (the date of the Tatoeba export); sizes are ``holdout_val`` and
``holdout_test`` (default 1,000 each).
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass

from ..data.textfiles import DataError


@dataclass
class Holdout:
    """Training pairs plus held-out sources with all their references (one list per source sentence)."""

    train_src: list[str]
    train_tgt: list[str]
    val_src: list[str]
    val_refs: list[list[str]]
    test_src: list[str]
    test_refs: list[list[str]]


def sentence_key(text: str) -> str:
    """What makes two source sentences "the same": equal text after collapsing whitespace."""
    return " ".join(text.split())


def holdout_rank(key: str, seed: int) -> bytes:
    """Sort key of a distinct source sentence: SHA-256 of ``"{seed}\\t{sentence}"``, stable everywhere."""
    return hashlib.sha256(f"{seed}\t{key}".encode()).digest()


def holdout_split(src: list[str], tgt: list[str], n_val: int, n_test: int, seed: int) -> Holdout:
    """Split aligned pairs into train / val / test by distinct source sentence (procedure in the module docstring)."""
    groups: dict[str, list[int]] = {}
    for i, line in enumerate(src):
        groups.setdefault(sentence_key(line), []).append(i)
    if n_val + n_test >= len(groups):
        raise DataError(f"holding out {n_val} + {n_test} source sentences needs more than the {len(groups)} "
                        "distinct ones in the corpus; lower holdout_val / holdout_test")
    ranked = sorted(groups, key=lambda key: holdout_rank(key, seed))
    val_keys, test_keys = ranked[:n_val], ranked[n_val:n_val + n_test]
    held = {i for key in val_keys + test_keys for i in groups[key]}

    def part(keys: list[str]) -> tuple[list[str], list[list[str]]]:
        return [src[groups[k][0]] for k in keys], [[tgt[i] for i in groups[k]] for k in keys]

    train = [i for i in range(len(src)) if i not in held]
    return Holdout([src[i] for i in train], [tgt[i] for i in train], *part(val_keys), *part(test_keys))


# --- the "connected" rule (for runs from 2026-11-24 on) --------------------------------------------------------------
MAX_HELD_GROUP = 50  # a connected group with more distinct sources than this stays in training, whole


def normalised(text: str) -> str:
    """What makes two sentences "the same" for the connected rule: case, punctuation and whitespace ignored."""
    kept = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text.casefold())
    return " ".join(kept.split())


def connected_groups(src: list[str], tgt: list[str]) -> list[list[int]]:
    """Pair indices joined whenever two pairs share a normalised source or a normalised target (union-find), so a
    paraphrase, a punctuation variant or a shared translation never sits on both sides of a split."""
    parent = list(range(len(src)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for side in (src, tgt):
        first: dict[str, int] = {}
        for i, text in enumerate(side):
            j = first.setdefault(normalised(text), i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(src)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def connected_holdout_split(src: list[str], tgt: list[str], n_val: int, n_test: int, seed: int) -> Holdout:
    """Split by connected group: whole groups (of at most MAX_HELD_GROUP distinct sources) are held out, ranked by
    the digest of their first source's normalised text, until val and then test hold `n_val` and `n_test` distinct
    source sentences (a group is never cut, so the last one may add a few); no normalised source or reference of
    val or test appears on either side of training."""
    ranked = []
    for members in connected_groups(src, tgt):
        sources: dict[str, list[int]] = {}
        for i in members:
            sources.setdefault(sentence_key(src[i]), []).append(i)
        if len(sources) <= MAX_HELD_GROUP:
            ranked.append((holdout_rank(normalised(src[members[0]]), seed), sources))
    ranked.sort(key=lambda item: item[0])
    parts: list[list[dict[str, list[int]]]] = [[], []]
    counts, part = [0, 0], 0
    for _, sources in ranked:
        while part < 2 and counts[part] >= (n_val, n_test)[part]:
            part += 1
        if part == 2:
            break
        parts[part].append(sources)
        counts[part] += len(sources)
    if counts[0] < n_val or counts[1] < n_test:
        raise DataError(f"holding out {n_val} + {n_test} source sentences needs more than the {sum(counts)} the "
                        "corpus's groups give; lower holdout_val / holdout_test")
    held = {i for group in parts[0] + parts[1] for members in group.values() for i in members}

    def flatten(groups: list[dict[str, list[int]]]) -> tuple[list[str], list[list[str]]]:
        entries = [members for group in groups for members in group.values()]
        return [src[m[0]] for m in entries], [[tgt[i] for i in m] for m in entries]

    train = [i for i in range(len(src)) if i not in held]
    return Holdout([src[i] for i in train], [tgt[i] for i in train], *flatten(parts[0]), *flatten(parts[1]))


HOLDOUT_RULES = {"source": holdout_split, "connected": connected_holdout_split}


def unseen_test_sentences(split: Holdout) -> list[int]:
    """Indices of the test sentences whose normalised source and every normalised reference appear on neither side
    of the training pairs: the part of a test set that the connected rule would also have held out."""
    training = {normalised(t) for t in split.train_src} | {normalised(t) for t in split.train_tgt}
    return [i for i, (source, refs) in enumerate(zip(split.test_src, split.test_refs))
            if normalised(source) not in training and not any(normalised(r) in training for r in refs)]
