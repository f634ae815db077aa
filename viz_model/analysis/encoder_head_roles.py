"""What an encoder's heads look at (Clark et al., 2019, "What Does BERT Look At?"): per layer and head, the attention
on [CLS], on [SEP], on punctuation, on the previous and the next token, and how broad it is (entropy), measured on a
text or a small corpus, with the paper's findings named where the model shows them.

Each share is a mean over the queries of one map ``(heads, n, n)`` (every query sees every key): the weight on the
keys of a set (the leading special token, the later special tokens, the punctuation tokens), on key i - 1 (queries
1..n-1), on key i + 1 (queries 0..n-2). Entropy is each row's in nats, averaged; breadth is it over log n (1: uniform).
Over several texts a head's score is the mean of its per-text scores. Layers and heads are 0-based.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..kinds.encoder import EncoderModel
from .lm_head_roles import check_map, maps_table, previous_token_score, row_entropies

ROLE_SCORES = ("cls", "sep", "punctuation", "previous_token", "next_token", "entropy", "breadth")
ROLE_COLUMNS = ["layer", "head", *ROLE_SCORES]
SHARE_SCORES = ("cls", "sep", "punctuation", "previous_token", "next_token", "breadth")  # 0 to 1 (entropy: nats)
ROLE_THRESHOLD = 0.5  # a head "puts its weight on" a set of keys when its mean share there is at least this
BROAD_THRESHOLD = 0.9  # a head "attends broadly" when its mean row entropy is at least this share of log n
FINDINGS = {  # score: what the paper found, the threshold named in the finding
    "sep": "puts {share:.0%} of its weight on [SEP] (Clark et al.: a no-op when the head's function does not apply)",
    "cls": "puts {share:.0%} of its weight on [CLS]",
    "punctuation": "puts {share:.0%} of its weight on punctuation (Clark et al.: periods and commas)",
    "previous_token": "follows the previous token ({share:.0%} of its weight on it)",
    "next_token": "follows the next token ({share:.0%} of its weight on it)",
}


@dataclass(frozen=True)
class KeySets:
    """The positions of one text's token sets.

    :ivar cls: the leading special token ([CLS], ``<s>``)
    :ivar sep: the special token that ends the text ([SEP], ``</s>``) wherever it stands (a pair's middle too)
    :ivar punctuation: the tokens whose text is punctuation alone
    """

    cls: list[int]
    sep: list[int]
    punctuation: list[int]


def is_punctuation(text: str) -> bool:
    """Whether `text` (a token's text, spaces and word-piece marks aside) is punctuation alone."""
    stripped = text.strip().removeprefix("##").strip()
    return bool(stripped) and all(unicodedata.category(c).startswith("P") for c in stripped)


def key_sets(ids: Sequence[int], texts: Sequence[str], special: Iterable[int], skip: Iterable[int] = ()) -> KeySets:
    """The token sets of `ids` (`texts`: each token's text; `special`: the special ids; `skip`: special ids in no
    set, such as the mask token and padding): the leading special token, every copy of the closing one,
    punctuation."""
    special, skip = set(special) - set(skip), set(skip)
    leading = [0] if ids and ids[0] in special else []
    closing = ids[-1] if ids and ids[-1] in special and len(ids) > 1 else None
    later = [i for i, token in enumerate(ids) if token == closing and i not in leading]
    punctuation = [i for i, (token, text) in enumerate(zip(ids, texts))
                   if token not in special and token not in skip and is_punctuation(text)]
    return KeySets(leading, later, punctuation)


def model_key_sets(model: EncoderModel, ids: Sequence[int]) -> KeySets:
    """`key_sets` of `ids` as `model`'s tokenizer writes and marks them (its mask token and pad in no set)."""
    tokenizer = model.tokenizer
    skip = {tokenizer.mask_id, model.config.pad_id}
    return key_sets(ids, [tokenizer.token_text(i) for i in ids], tokenizer.skipped, skip)


def set_share(weights: np.ndarray, positions: Sequence[int]) -> np.ndarray:
    """Per head, the weight each query puts on the keys `positions`, averaged over every query."""
    w = check_map(weights)
    return w[:, :, list(positions)].sum(axis=-1).mean(axis=1)


def next_token_score(weights: np.ndarray) -> np.ndarray:
    """Per head, the mean weight query i puts on key i + 1, over queries 0..n-2."""
    w = check_map(weights)
    rows = np.arange(w.shape[1] - 1)
    return w[:, rows, rows + 1].mean(axis=1) if rows.size else np.full(w.shape[0], np.nan)


def full_entropy(weights: np.ndarray) -> np.ndarray:
    """Per head, the mean over every query of its row's entropy in nats (0 log 0 = 0)."""
    return row_entropies(check_map(weights)).mean(axis=1)


def map_scores(weights: np.ndarray, sets: KeySets) -> dict[str, np.ndarray]:
    """Every score of `ROLE_SCORES` for each head of one map ``(heads, n, n)`` with the text's `sets`."""
    spread = full_entropy(weights)
    n = weights.shape[-1]
    return {"cls": set_share(weights, sets.cls), "sep": set_share(weights, sets.sep),
            "punctuation": set_share(weights, sets.punctuation), "previous_token": previous_token_score(weights),
            "next_token": next_token_score(weights), "entropy": spread,
            "breadth": spread / np.log(n) if n > 1 else np.full(len(spread), np.nan)}


def roles_table(sequences: Iterable[tuple[list[np.ndarray], KeySets]]) -> pd.DataFrame:
    """One row per (layer, head): each score's mean over `sequences` (per layer maps ``(heads, n, n)``, the text's
    sets); a column ``sequences`` says over how many."""
    return maps_table(sequences, map_scores, ROLE_COLUMNS)


@torch.inference_mode()
def text_maps(model: EncoderModel, text: str, text_pair: str | None = None) -> tuple[list[np.ndarray], KeySets]:
    """Per layer ``(heads, n, n)`` float64 of `text` (and `text_pair`), and its token sets."""
    encoded = model.encoded(text, text_pair)
    out = model.forced_pass(encoded.ids, encoded.type_ids, need_weights=True)
    return [weights[0].double().cpu().numpy() for weights in out.attentions], model_key_sets(model, encoded.ids)


def text_roles(model: EncoderModel, text: str, text_pair: str | None = None) -> pd.DataFrame:
    """`roles_table` of one text (or pair)."""
    return roles_table([text_maps(model, text, text_pair)])


def corpus_roles(model: EncoderModel, sentences: Sequence[str]) -> pd.DataFrame:
    """`roles_table` over those of `sentences` the model can read whole (a small model's positions leave the longest
    out: the ``sequences`` column says how many were read), each weighing the same."""
    if not sentences:
        raise ValueError("no sentences to score the heads on")
    read = [sentence for sentence in sentences if fits(model, sentence)]
    if not read:
        raise ValueError(f"none of the {len(sentences)} sentences fits in this model's positions")
    return roles_table(text_maps(model, sentence) for sentence in read)


def fits(model: EncoderModel, text: str) -> bool:
    """Whether the model reads `text` whole (within its positions)."""
    try:
        model.encoded(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Finding:
    """One of the paper's findings shown by one head: its layer and head (0-based), the score, its value, the
    sentence that names it (its layer and head counted from 1, as the paper and the app write them)."""

    layer: int
    head: int
    score: str
    value: float
    text: str


def findings(table: pd.DataFrame, threshold: float = ROLE_THRESHOLD, broad: float = BROAD_THRESHOLD
             ) -> list[Finding]:
    """The heads of `table` (`roles_table`) that show a finding of Clark et al.: a share of at least `threshold`
    on [SEP], [CLS], punctuation, the previous or the next token, or a breadth of at least `broad`; per score the
    strongest head first."""
    if not 0 < threshold <= 1 or not 0 < broad <= 1:
        raise ValueError(f"the thresholds must be shares from 0 (excluded) to 1, got {threshold!r} and {broad!r}")
    found = []
    for score, sentence in [*FINDINGS.items(), ("breadth", "attends broadly (entropy {share:.0%} of the uniform's: "
                                                "Clark et al.'s broad heads of the lower layers)")]:
        limit = broad if score == "breadth" else threshold
        rows = table[table[score] >= limit].sort_values(score, ascending=False)
        found.extend(Finding(int(row["layer"]), int(row["head"]), score, float(row[score]),
                             f"layer {int(row['layer']) + 1} head {int(row['head']) + 1} "
                             + sentence.format(share=row[score])) for _, row in rows.iterrows())
    return found
