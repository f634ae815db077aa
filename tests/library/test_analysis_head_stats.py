"""Per-head attention statistics and roles (viz_model.analysis.head_stats), checked against hand-computed values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from viz_model.analysis.head_stats import (
    OTHER_ROLE,
    ROLE_RULES,
    STATISTICS,
    RoleRule,
    corpus_statistics,
    head_roles,
    is_punctuation,
    map_statistics,
    role_summary,
    sentence_statistics,
)

LN2, LN3 = math.log(2), math.log(3)

# one head of encoder self-attention over ["▁A", ".", "</s>"], written out by hand
ENCODER = np.array([[0.5, 0.25, 0.25],
                    [0.5, 0.5, 0.0],
                    [0.0, 0.25, 0.75]])
ENCODER_TOKENS = ["▁A", ".", "</s>"]
# causal decoder self-attention over ["<s>", "▁Ein", "."]
DECODER = np.array([[1.0, 0.0, 0.0],
                    [0.5, 0.5, 0.0],
                    [0.25, 0.25, 0.5]])
DECODER_TOKENS = ["<s>", "▁Ein", "."]
# cross-attention: 2 target queries x 4 source keys ["▁Two", "▁dogs", ".", "</s>"]
CROSS = np.array([[0.1, 0.6, 0.2, 0.1],
                  [0.0, 0.1, 0.2, 0.7]])
CROSS_TOKENS = ["▁Two", "▁dogs", ".", "</s>"]


def one_head(a: np.ndarray) -> np.ndarray:
    return a[None]


def test_encoder_statistics_by_hand():
    s = map_statistics(one_head(ENCODER), "encoder", ENCODER_TOKENS)
    # row entropies: 1.5 ln2, ln2, 0.25 ln4 + 0.75 ln(4/3) = 2 ln2 - 0.75 ln3
    assert s["entropy"][0] == pytest.approx((1.5 * LN2 + LN2 + 2 * LN2 - 0.75 * LN3) / 3)
    assert s["entropy_ratio"][0] == pytest.approx((1.5 * LN2 + LN2 + 2 * LN2 - 0.75 * LN3) / 3 / LN3)
    assert s["same"][0] == pytest.approx((0.5 + 0.5 + 0.75) / 3)
    assert s["previous"][0] == pytest.approx((0.5 + 0.25) / 2)  # rows 1 and 2 have a previous key
    assert s["next"][0] == pytest.approx((0.25 + 0.0) / 2)  # rows 0 and 1 have a next key
    assert s["diagonal"][0] == pytest.approx((0.75 + 1.0 + 1.0) / 3)  # keys i-1..i+1
    assert s["distance"][0] == pytest.approx((0.75 + 0.5 + 0.25) / 3)  # sum_j a_ij |i - j|
    assert s["delimiter"][0] == pytest.approx((0.25 + 0.0 + 0.75) / 3)  # key 2 is </s>
    assert s["punctuation"][0] == pytest.approx((0.25 + 0.5 + 0.25) / 3)  # key 1 is "."
    assert set(s) == set(STATISTICS)


def test_decoder_statistics_by_hand():
    s = map_statistics(one_head(DECODER), "decoder", DECODER_TOKENS)
    assert s["entropy"][0] == pytest.approx((0 + LN2 + 1.5 * LN2) / 3)
    # row 0 sees one key (left out); row 1 sees 2 keys (uniform: 1), row 2 sees 3
    assert s["entropy_ratio"][0] == pytest.approx((1.0 + 1.5 * LN2 / LN3) / 2)
    assert s["same"][0] == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    assert s["previous"][0] == pytest.approx((0.5 + 0.25) / 2)
    assert np.isnan(s["next"][0])  # hidden by the causal mask
    assert s["delimiter"][0] == pytest.approx((1.0 + 0.5 + 0.25) / 3)  # key 0 is <s>
    assert s["punctuation"][0] == pytest.approx((0 + 0 + 0.5) / 3)
    assert s["distance"][0] == pytest.approx((0 + 0.5 + (0.5 + 0.25)) / 3)


def test_cross_statistics_use_the_proportional_diagonal():
    s = map_statistics(one_head(CROSS), "cross", CROSS_TOKENS)
    for name in ("same", "previous", "next"):
        assert np.isnan(s[name][0]), name
    # c_i = (i + 0.5) * 4 / 2 - 0.5 = 0.5, 2.5 -> windows around keys 1 (0..2) and 3 (2..3)
    assert s["diagonal"][0] == pytest.approx((0.9 + 0.9) / 2)
    # row 0: .5*.1 + .5*.6 + 1.5*.2 + 2.5*.1 = 0.9; row 1: 1.5*.1 + .5*.2 + .5*.7 = 0.6
    assert s["distance"][0] == pytest.approx((0.9 + 0.6) / 2)
    assert s["delimiter"][0] == pytest.approx((0.1 + 0.7) / 2)
    assert s["punctuation"][0] == pytest.approx((0.2 + 0.2) / 2)


def test_heads_are_kept_apart():
    maps = np.stack([ENCODER, np.eye(3)])
    s = map_statistics(maps, "encoder", ENCODER_TOKENS)
    assert s["same"][1] == 1.0 and s["entropy"][1] == 0.0 and s["previous"][1] == 0.0
    assert s["same"][0] == pytest.approx(1.75 / 3)


def test_single_token_rows_give_nan_not_a_warning():
    with np.errstate(all="raise"):
        s = map_statistics(np.ones((2, 1, 1)), "encoder", ["</s>"])
    assert np.isnan(s["previous"]).all() and np.isnan(s["next"]).all() and np.isnan(s["entropy_ratio"]).all()
    assert (s["delimiter"] == 1.0).all()


@pytest.mark.parametrize("piece, expected", [("▁.", True), (",", True), ("!?", True), ("▁", False),
                                             ("▁dog", False), ("3", False), ("</s>", False), ("„", True)])
def test_is_punctuation(piece, expected):
    assert is_punctuation(piece) is expected


@pytest.mark.parametrize("args, match", [
    ((ENCODER, "encoder", ENCODER_TOKENS), "heads, query_len, key_len"),
    ((one_head(ENCODER), "self", ENCODER_TOKENS), "attention kind"),
    ((one_head(ENCODER), "encoder", ENCODER_TOKENS[:2]), "2 key tokens"),
    ((one_head(CROSS), "encoder", CROSS_TOKENS), "square"),
    ((one_head(-ENCODER), "encoder", ENCODER_TOKENS), "non-negative"),
    ((one_head(ENCODER * np.nan), "encoder", ENCODER_TOKENS), "finite"),
])
def test_map_errors(args, match):
    with pytest.raises(ValueError, match=match):
        map_statistics(*args)


@dataclass
class Record:
    """A hand-made sentence: the fields the statistics read."""

    source_tokens: list[str]
    target_tokens: list[str]
    encoder_attentions: list[np.ndarray]
    decoder_attentions: list[np.ndarray] = field(default_factory=list)
    cross_attentions: list[np.ndarray] = field(default_factory=list)


def two_sentences() -> list[Record]:
    cross = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    first = Record(ENCODER_TOKENS, DECODER_TOKENS, [one_head(ENCODER)], [one_head(DECODER)], [one_head(cross)])
    second = Record(["</s>"], ["<s>"], [np.ones((1, 1, 1))], [np.ones((1, 1, 1))], [np.ones((1, 1, 1))])
    return [first, second]


def test_sentence_and_corpus_statistics():
    records = two_sentences()
    per_sentence = sentence_statistics(iter(records))
    assert list(per_sentence.columns[:4]) == ["sentence", "kind", "layer", "head"]
    assert len(per_sentence) == 2 * 3  # two sentences x three kinds x one layer x one head
    stats = corpus_statistics(per_sentence)
    assert list(stats["kind"]) == ["encoder", "decoder", "cross"]
    encoder = stats[stats["kind"] == "encoder"].iloc[0]
    assert encoder["sentences"] == 2
    assert encoder["same"] == pytest.approx((1.75 / 3 + 1.0) / 2)  # each sentence weighs the same
    assert encoder["previous"] == pytest.approx(0.375)  # the one-token sentence has no previous key: skipped
    assert encoder["delimiter"] == pytest.approx((1 / 3 + 1.0) / 2)
    cross = stats[stats["kind"] == "cross"].iloc[0]
    assert cross["delimiter"] == pytest.approx((1 / 3 + 1.0) / 2)  # first sentence: row 1 puts all on </s>
    assert cross["punctuation"] == pytest.approx((1.5 / 3 + 0.0) / 2)  # key 1 is "."


def test_sentence_column_follows_record_index():
    record = two_sentences()[1]
    record.index = 7  # as corpus.SentenceAttention carries it
    assert set(sentence_statistics([record])["sentence"]) == {7}
    with pytest.raises(ValueError, match="no sentences"):
        sentence_statistics([])
    with pytest.raises(ValueError, match="missing"):
        corpus_statistics(pd.DataFrame({"kind": ["encoder"]}))


def stats_table(rows: list[dict]) -> pd.DataFrame:
    """A corpus_statistics-shaped table: unnamed statistics are 0 (entropy_ratio too: not broad)."""
    full = [{"kind": "encoder", "layer": 0, "head": i, **{s: 0.0 for s in STATISTICS}, **row}
            for i, row in enumerate(rows)]
    return pd.DataFrame(full)


def test_roles_follow_the_rules_in_order():
    rules = {rule.role: rule for rule in ROLE_RULES}
    above = {role: rule.threshold + (1 - rule.threshold) / 2 for role, rule in rules.items()}
    stats = stats_table([
        {"previous": above["positional: previous"], "diagonal": 1.0},  # both previous and diagonal: first rule wins
        {"next": above["positional: next"]},
        {"same": above["self"]},
        {"delimiter": above["delimiter"]},
        {"punctuation": above["punctuation"]},
        {"diagonal": above["diagonal"]},
        {"entropy_ratio": above["broad"]},
        {"entropy_ratio": rules["broad"].threshold / 2, "same": rules["self"].threshold / 2},
        {"same": np.nan, "previous": np.nan, "next": np.nan, "diagonal": above["diagonal"]},  # cross-like
    ])
    roles = head_roles(stats)
    assert list(roles["role"]) == ["positional: previous", "positional: next", "self", "delimiter", "punctuation",
                                   "diagonal", "broad", OTHER_ROLE, "diagonal"]
    assert roles["role_score"].iloc[0] == pytest.approx(above["positional: previous"])
    assert roles["role_statistic"].iloc[0] == "previous"
    assert np.isnan(roles["role_score"].iloc[7]) and (roles["example_sentence"] == -1).all()
    custom = head_roles(stats, rules=[RoleRule("copying", "same", 0.0)])
    assert list(custom["role"]) == ["copying"] * 8 + [OTHER_ROLE]  # NaN meets no rule
    with pytest.raises(ValueError, match="role rule"):
        head_roles(stats, rules=[RoleRule("x", "nonsense", 0.5)])


def test_role_examples_point_at_the_strongest_sentence():
    per_sentence = pd.DataFrame([{"sentence": s, "kind": "encoder", "layer": 0, "head": 0,
                                  **{name: 0.0 for name in STATISTICS}, "previous": value}
                                 for s, value in [(0, 0.6), (1, 0.95), (2, np.nan), (3, 0.7)]])
    roles = head_roles(corpus_statistics(per_sentence), per_sentence)
    assert roles["role"].iloc[0] == "positional: previous"
    assert roles["role_score"].iloc[0] == pytest.approx((0.6 + 0.95 + 0.7) / 3)
    assert roles["example_sentence"].iloc[0] == 1 and roles["example_value"].iloc[0] == pytest.approx(0.95)
    summary = role_summary(roles, ["a", "b", "c", "d"])
    assert summary.to_dict("records") == [{"role": "positional: previous", "heads": 1, "top_heads": "encoder L0 H0",
                                           "example_sentence": 1, "example_value": pytest.approx(0.95),
                                           "example_text": "b"}]
    with pytest.raises(ValueError, match="top"):
        role_summary(roles, top=0)


def test_role_summary_ranks_heads_and_puts_other_last():
    stats = stats_table([{"same": 0.6}, {}, {"same": 0.9}, {"same": 0.7}])
    summary = role_summary(head_roles(stats), top=2)
    assert list(summary["role"]) == ["self", OTHER_ROLE]
    assert summary["heads"].tolist() == [3, 1]
    assert summary["top_heads"].iloc[0] == "encoder L0 H2, encoder L0 H3"
