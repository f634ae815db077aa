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

No source sentence is in two parts. The seed is the corpus's ``holdout_seed``, by default
`viz_model.config.HOLDOUT_SEED` = 20180513 (the date of the Tatoeba export); sizes are ``holdout_val`` and
``holdout_test`` (default 1,000 each).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .data import DataError


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
