"""Per-head statistics of attention maps, aggregated over a corpus, and a rule that names each head's role.

Every statistic is computed per query row of one sentence's map ``(heads, query_len, key_len)``, averaged over the
rows of that sentence, then over sentences (each sentence weighs the same, so long sentences do not dominate):

- ``entropy``: row entropy in nats (``0 log 0 = 0``); ``entropy_ratio``: entropy / log(number of keys the row may
  see), 1 = uniform (rows that see a single key are left out).
- ``same`` / ``previous`` / ``next``: weight on key i, i-1, i+1 for query i. Defined for self-attention only: in
  cross-attention query i (a target position) and key i (a source position) are different sentences, so these are
  NaN there; ``next`` is NaN for decoder self-attention too (the causal mask hides it). Rows without that
  neighbour (the first row for ``previous``, the last for ``next``) are left out.
- ``diagonal``: weight within +-1 key of the proportional diagonal: query i's diagonal key is
  ``c_i = (i + 0.5) * key_len / query_len - 0.5`` (cell centres mapped onto each other; ``c_i = i`` for
  self-attention), and the window is the keys ``round(c_i) - 1 .. round(c_i) + 1``. For cross-attention it measures
  a monotone, length-proportional alignment.
- ``distance``: weighted mean ``|j - c_i|`` (for self-attention the attended distance ``|i - j|``).
- ``delimiter``: weight on the special keys ``<s>`` / ``</s>`` (source keys end in ``</s>``, target keys start
  with ``<s>``); ``punctuation``: weight on keys whose piece, without ``▁``, is all Unicode punctuation.

`head_roles` names each head by the first rule of `ROLE_RULES` its corpus statistics meet (transparent thresholds,
no clustering) and points at the sentence where the deciding statistic is largest.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from ..config.checks import check_int
from ..nn.kinds import ATTENTION_KINDS
from ..tokenization.tokenizer import WORD_START

STATISTICS = ("entropy", "entropy_ratio", "same", "previous", "next", "diagonal", "distance", "delimiter",
              "punctuation")
SHARE_STATISTICS = ("entropy_ratio", "same", "previous", "next", "diagonal", "delimiter", "punctuation")  # 0 to 1
SPECIAL_TOKENS = ("<s>", "</s>")
HEAD_COLUMNS = ["kind", "layer", "head"]


class AttentionRecord(Protocol):
    """What the statistics read from one sentence: `AttentionTrace` and `corpus.SentenceAttention` both fit."""

    source_tokens: list[str]
    target_tokens: list[str]
    encoder_attentions: list[np.ndarray]
    decoder_attentions: list[np.ndarray]
    cross_attentions: list[np.ndarray]


@dataclass(frozen=True)
class RoleRule:
    """A head takes `role` when its corpus mean of `statistic` is at least `threshold`.

    :ivar role: the role's name
    :ivar statistic: one of `STATISTICS`
    :ivar threshold: the corpus mean a head needs
    """

    role: str
    statistic: str
    threshold: float


ROLE_RULES = (
    RoleRule("positional: previous", "previous", 0.5),
    RoleRule("positional: next", "next", 0.5),
    RoleRule("self", "same", 0.5),
    RoleRule("delimiter", "delimiter", 0.5),
    RoleRule("punctuation", "punctuation", 0.5),
    RoleRule("diagonal", "diagonal", 0.6),
    RoleRule("broad", "entropy_ratio", 0.7),
)
OTHER_ROLE = "other"


def is_punctuation(piece: str) -> bool:
    """True for a piece such as ``▁.`` or ``,``: non-empty and all Unicode punctuation once ``▁`` is removed."""
    text = piece.replace(WORD_START, "")
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def _check_map(weights: np.ndarray, kind: str, key_tokens: Sequence[str]) -> np.ndarray:
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {', '.join(ATTENTION_KINDS)}; got {kind!r}")
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 3 or 0 in w.shape:
        raise ValueError(f"an attention map must be a non-empty (heads, query_len, key_len) array, got {w.shape}")
    if len(key_tokens) != w.shape[2]:
        raise ValueError(f"{len(key_tokens)} key tokens for a map with {w.shape[2]} keys")
    if kind != "cross" and w.shape[1] != w.shape[2]:
        raise ValueError(f"{kind} self-attention maps are square, got {w.shape[1]} queries x {w.shape[2]} keys")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("attention weights must be finite and non-negative")
    return w


def _row_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis of ``(heads, rows)``; NaN when there are no rows."""
    return values.mean(axis=-1) if values.shape[-1] else np.full(values.shape[0], np.nan)


def diagonal_keys(query_len: int, key_len: int) -> np.ndarray:
    """For each query the exact proportional diagonal position ``c_i = (i + 0.5) * key_len / query_len - 0.5``."""
    return (np.arange(query_len) + 0.5) * key_len / query_len - 0.5


def map_statistics(weights: np.ndarray, kind: str, key_tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Every statistic of `STATISTICS` for each head of one sentence's map ``(heads, query_len, key_len)``.

    Returns ``{name: array of shape (heads,)}``, each the mean over the map's rows (see the module docstring).
    """
    w = _check_map(weights, kind, key_tokens)
    heads, q_len, k_len = w.shape
    rows, keys = np.arange(q_len), np.arange(k_len)
    logs = np.log(w, where=w > 0, out=np.zeros_like(w))
    entropy = -(w * logs).sum(axis=-1)  # (heads, q_len)
    visible = rows + 1 if kind == "decoder" else np.full(q_len, k_len)
    several = visible > 1
    centre = diagonal_keys(q_len, k_len)
    nearest = np.floor(centre + 0.5)
    window = np.abs(keys[None, :] - nearest[:, None]) <= 1  # (q_len, k_len)
    distance = np.abs(keys[None, :] - centre[:, None])
    delimiter = np.array([t in SPECIAL_TOKENS for t in key_tokens])
    punctuation = np.array([is_punctuation(t) for t in key_tokens])
    nan = np.full(heads, np.nan)
    self_attention = kind != "cross"
    return {
        "entropy": _row_mean(entropy),
        "entropy_ratio": _row_mean(entropy[:, several] / np.log(visible[several])),
        "same": _row_mean(w[:, rows, rows]) if self_attention else nan,
        "previous": _row_mean(w[:, rows[1:], rows[1:] - 1]) if self_attention else nan,
        "next": _row_mean(w[:, rows[:-1], rows[:-1] + 1]) if kind == "encoder" else nan,
        "diagonal": _row_mean((w * window).sum(axis=-1)),
        "distance": _row_mean((w * distance).sum(axis=-1)),
        "delimiter": _row_mean(w[:, :, delimiter].sum(axis=-1)),
        "punctuation": _row_mean(w[:, :, punctuation].sum(axis=-1)),
    }


def _key_tokens(record: AttentionRecord, kind: str) -> list[str]:
    return record.target_tokens if kind == "decoder" else record.source_tokens


def sentence_statistics(records: Iterable[AttentionRecord]) -> pd.DataFrame:
    """One row per (sentence, kind, layer, head) with every statistic; `records` may be a lazy iterator.

    The ``sentence`` column is the record's ``index`` when it has one (`corpus.SentenceAttention`), else its
    position in `records` (e.g. a list of `AttentionTrace`).
    """
    columns: dict[str, list[np.ndarray]] = {name: [] for name in ["sentence", *HEAD_COLUMNS, *STATISTICS]}
    for position, record in enumerate(records):
        sentence = getattr(record, "index", position)
        for kind in ATTENTION_KINDS:
            for layer, weights in enumerate(getattr(record, f"{kind}_attentions")):
                stats = map_statistics(weights, kind, _key_tokens(record, kind))
                heads = len(stats["entropy"])
                columns["sentence"].append(np.full(heads, sentence))
                columns["kind"].append(np.full(heads, kind, dtype=object))
                columns["layer"].append(np.full(heads, layer))
                columns["head"].append(np.arange(heads))
                for name in STATISTICS:
                    columns[name].append(stats[name])
    if not columns["sentence"]:
        raise ValueError("no sentences to compute attention statistics of")
    return pd.DataFrame({name: np.concatenate(parts) for name, parts in columns.items()})


def _kind_order(df: pd.DataFrame) -> pd.DataFrame:
    order = {kind: i for i, kind in enumerate(ATTENTION_KINDS)}
    return df.sort_values(HEAD_COLUMNS, key=lambda c: c.map(order) if c.name == "kind" else c, ignore_index=True)


def corpus_statistics(per_sentence: pd.DataFrame) -> pd.DataFrame:
    """Per head (kind, layer, head): the mean over sentences of each statistic (NaN skipped) and ``sentences``."""
    missing = [c for c in ["sentence", *HEAD_COLUMNS, *STATISTICS] if c not in per_sentence.columns]
    if missing:
        raise ValueError(f"not a sentence_statistics table: columns {missing} are missing")
    grouped = per_sentence.groupby(HEAD_COLUMNS, sort=False)
    stats = grouped[list(STATISTICS)].mean()
    stats.insert(0, "sentences", grouped["sentence"].nunique())
    return _kind_order(stats.reset_index())


def _role_of(row: pd.Series, rules: Sequence[RoleRule]) -> tuple[str, str | None, float]:
    for rule in rules:
        value = row[rule.statistic]
        if pd.notna(value) and value >= rule.threshold:
            return rule.role, rule.statistic, float(value)
    return OTHER_ROLE, None, float("nan")


def _check_rules(rules: Sequence[RoleRule]) -> None:
    for rule in rules:
        if not isinstance(rule, RoleRule) or rule.statistic not in STATISTICS or rule.role == OTHER_ROLE:
            raise ValueError(f"a role rule is RoleRule(role, statistic, threshold) with a statistic of {STATISTICS} "
                             f"and a role other than {OTHER_ROLE!r}; got {rule!r}")


def head_roles(statistics: pd.DataFrame, per_sentence: pd.DataFrame | None = None,
               rules: Sequence[RoleRule] = ROLE_RULES) -> pd.DataFrame:
    """`statistics` (from `corpus_statistics`) plus ``role`` (the first of `rules` the head meets, else "other"),
    ``role_statistic`` / ``role_score`` (the deciding statistic and its value) and, given the `per_sentence` table,
    ``example_sentence`` / ``example_value``: the sentence where that statistic of the head is largest (-1 / NaN
    for "other" heads or without `per_sentence`)."""
    missing = [c for c in [*HEAD_COLUMNS, *STATISTICS] if c not in statistics.columns]
    if missing:
        raise ValueError(f"not a corpus_statistics table: columns {missing} are missing")
    _check_rules(rules)
    out = statistics.copy()
    decided = [_role_of(row, rules) for _, row in out.iterrows()]
    out["role"] = [role for role, _, _ in decided]
    out["role_statistic"] = [statistic for _, statistic, _ in decided]
    out["role_score"] = [score for _, _, score in decided]
    out["example_sentence"], out["example_value"] = -1, np.nan
    if per_sentence is None:
        return out
    per_sentence = per_sentence.reset_index(drop=True)
    groups = per_sentence.groupby(HEAD_COLUMNS)
    for i, row in out.iterrows():
        statistic = row["role_statistic"]
        if not isinstance(statistic, str):  # "other": no deciding statistic
            continue
        values = groups.get_group((row["kind"], row["layer"], row["head"]))[statistic]
        if not values.notna().any():
            continue
        best = values.idxmax()
        out.loc[i, "example_sentence"] = int(per_sentence.at[best, "sentence"])
        out.loc[i, "example_value"] = float(values[best])
    return out


def head_label(kind: str, layer: int, head: int) -> str:
    """A short readable name of a head, e.g. ``encoder L0 H3`` (0-based)."""
    return f"{kind} L{layer} H{head}"


def role_summary(roles: pd.DataFrame, sentences: Sequence[str] | None = None, top: int = 3) -> pd.DataFrame:
    """One row per role found: how many heads, the `top` heads by role score, and the best head's example
    sentence (its index, value and, given `sentences`, its text). Roles appear in order of first appearance in
    `ROLE_RULES`, then the others, "other" last."""
    check_int("top", top, 1, error=ValueError, message=f"top must be an integer >= 1, got {top!r}")
    found = list(dict.fromkeys(roles["role"]))
    known = [rule.role for rule in ROLE_RULES]
    order = sorted(found, key=lambda r: (r == OTHER_ROLE, known.index(r) if r in known else len(known)))
    rows = []
    for role in order:
        group = roles[roles["role"] == role]
        if group.empty:
            continue
        ranked = group.sort_values("role_score", ascending=False, kind="stable")
        best = ranked.iloc[0]
        example = int(best["example_sentence"])
        text = sentences[example] if sentences is not None and example >= 0 else ""
        rows.append({"role": role, "heads": len(group),
                     "top_heads": ", ".join(head_label(r.kind, r.layer, r.head) for r in ranked.head(top).itertuples()),
                     "example_sentence": example, "example_value": best["example_value"], "example_text": text})
    return pd.DataFrame(rows, columns=["role", "heads", "top_heads", "example_sentence", "example_value",
                                       "example_text"])
