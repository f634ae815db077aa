"""Cross-attention as word alignment (viz_model.analysis.word_alignment): merging, links, Pharaoh files, AER by hand."""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass

import numpy as np
import pytest
from support.data import make_pairs

from viz_model.analysis.word_alignment import (
    Alignment,
    alignment_error_rate,
    alignment_links,
    attention_aer,
    corpus_aer,
    format_pharaoh,
    layer_word_attention,
    parse_pharaoh,
    read_pharaoh,
    word_attention,
    word_groups,
)

SOURCE = ["▁Two", "▁do", "gs", "▁play", ".", "</s>"]  # words: Two, dogs, play.
OUTPUT = ["▁Zwei", "▁Hun", "de", "</s>"]  # words: Zwei, Hunde (what rows 0..3 predicted)
TARGET = ["<s>", "▁Zwei", "▁Hun", "de"]  # what rows 0..3 read
HEAD_0 = np.array([[0.7, 0.1, 0.1, 0.0, 0.0, 0.1],
                   [0.0, 0.4, 0.4, 0.1, 0.0, 0.1],
                   [0.0, 0.2, 0.6, 0.0, 0.0, 0.2],
                   [0.0, 0.0, 0.0, 0.2, 0.3, 0.5]])
HEAD_1 = np.array([[0.0, 0.0, 0.0, 0.5, 0.0, 0.5],
                   [0.5, 0.0, 0.0, 0.0, 0.0, 0.5],
                   [0.5, 0.0, 0.0, 0.0, 0.0, 0.5],
                   [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])


def test_word_groups_leave_special_tokens_out():
    assert word_groups(SOURCE) == ([[0], [1, 2], [3, 4]], ["Two", "dogs", "play."])
    assert word_groups(TARGET) == ([[1], [2, 3]], ["Zwei", "Hunde"])


def test_word_attention_sums_source_pieces_and_averages_target_pieces():
    words = word_attention(HEAD_0, SOURCE, OUTPUT)
    assert words.source_words == ["Two", "dogs", "play."] and words.target_words == ["Zwei", "Hunde"]
    # Zwei: row 0 summed per source word; Hunde: mean of rows 1 ([0, .8, .1]) and 2 ([0, .8, 0])
    np.testing.assert_allclose(words.weights, [[0.7, 0.2, 0.0], [0.0, 0.8, 0.05]])
    both = word_attention(np.stack([HEAD_0, HEAD_1]), SOURCE, OUTPUT)
    assert both.weights.shape == (2, 2, 3)
    np.testing.assert_allclose(both.weights[1], [[0.0, 0.0, 0.5], [0.5, 0.0, 0.0]])
    with pytest.raises(ValueError, match="does not fit"):
        word_attention(HEAD_0, SOURCE[:-1], OUTPUT)


def test_links_argmax_and_threshold():
    weights = word_attention(HEAD_0, SOURCE, OUTPUT).weights
    assert alignment_links(weights) == {(0, 0), (1, 1)}  # (source word, target word)
    assert alignment_links(weights, threshold=0.75) == {(1, 1)}  # Zwei's best weight is 0.7
    assert alignment_links(np.zeros((2, 0))) == set()
    with pytest.raises(ValueError, match="threshold"):
        alignment_links(weights, threshold=2.0)
    with pytest.raises(ValueError, match="one"):
        alignment_links(np.zeros((2, 2, 2)))


def test_pharaoh_parse_and_format():
    gold = parse_pharaoh("0-0 1-1 2?1 3-2-P 4-4-S")
    assert gold.sure == {(0, 0), (1, 1), (4, 4)}
    assert gold.possible == {(0, 0), (1, 1), (4, 4), (2, 1), (3, 2)}  # sure links are possible too
    assert format_pharaoh(gold.sure, gold.possible) == "0-0 1-1 2?1 3?2 4-4"
    assert parse_pharaoh(format_pharaoh(gold.sure, gold.possible)) == gold
    assert parse_pharaoh("") == Alignment()
    assert Alignment(frozenset({(0, 1)})).possible == {(0, 1)}
    for bad in ("0-", "a-1", "1-2-X", "-1-2", "1:2"):
        with pytest.raises(ValueError, match="bad alignment link"):
            parse_pharaoh(bad)


def write_gold(tmp_path, lines: list[str], name: str = "gold.align"):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    else:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["gold.align", "gold.align.gz"])
def test_aer_by_hand_from_a_file(tmp_path, name):
    gold = read_pharaoh(write_gold(tmp_path, ["0-0 1-1 2?1", "0-1 1-0"], name))
    predicted = [{(0, 0), (2, 1)}, {(0, 1), (1, 1)}]
    # |A| = 4, |S| = 4, |A & S| = 1 + 1, |A & P| = 2 + 1:  AER = 1 - (2 + 3) / (4 + 4)
    assert alignment_error_rate(predicted, gold) == pytest.approx(0.375)
    assert alignment_error_rate([gold[0].sure, gold[1].sure], gold) == 0.0
    assert math.isnan(alignment_error_rate([set(), set()], [Alignment(), Alignment()]))  # nothing to compare
    with pytest.raises(ValueError, match="2 gold"):
        alignment_error_rate(predicted[:1], gold)


def test_read_pharaoh_errors(tmp_path):
    with pytest.raises(ValueError, match="line 2: bad alignment link"):
        read_pharaoh(write_gold(tmp_path, ["0-0", "0-0 x"]))
    (tmp_path / "empty.align").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        read_pharaoh(tmp_path / "empty.align")
    with pytest.raises(ValueError, match="not found"):
        read_pharaoh(tmp_path / "missing.align")


@dataclass
class Record:
    source_tokens: list[str]
    target_tokens: list[str]
    output_tokens: list[str]
    cross_attentions: list[np.ndarray]


def test_attention_aer_per_head_and_layer_mean():
    record = Record(SOURCE, TARGET, OUTPUT, [np.stack([HEAD_0, HEAD_1])])
    table = attention_aer([record], [parse_pharaoh("0-0 1-1")])
    assert list(table.columns) == ["layer", "head", "aer", "precision", "recall", "links"]
    assert table["head"].isna().tolist() == [False, False, True]  # heads 0, 1, then the layer mean
    rows = table.to_dict("records")
    assert rows[0]["aer"] == 0.0 and rows[0]["precision"] == 1.0 and rows[0]["recall"] == 1.0
    assert rows[1]["aer"] == 1.0 and rows[1]["links"] == 2  # Zwei -> play., Hunde -> Two
    # the layer mean: Zwei [.35, .1, .25] -> Two, Hunde [.25, .4, .025] -> dogs
    assert rows[2]["aer"] == 0.0
    # the rows that read the words: Zwei = row 1 -> dogs, Hunde = mean of rows 2, 3 [0, .4, .25] -> dogs
    shifted = attention_aer([record], [parse_pharaoh("0-0 1-1")], rows="input")
    assert shifted["aer"].iloc[0] == pytest.approx(0.5)
    assert layer_word_attention(record, 0, "input").target_words == ["Zwei", "Hunde"]


def test_attention_aer_errors():
    record = Record(SOURCE, TARGET, OUTPUT, [np.stack([HEAD_0])])
    with pytest.raises(ValueError, match="outside its 3 source x 2 target words"):
        attention_aer([record], [parse_pharaoh("5-0")])
    with pytest.raises(ValueError, match="no gold alignment"):
        attention_aer([record, record], [parse_pharaoh("0-0")])
    with pytest.raises(ValueError, match="1 sentences but 2 gold"):
        attention_aer([record], [parse_pharaoh("0-0"), parse_pharaoh("0-0")])
    with pytest.raises(ValueError, match="rows must be"):
        attention_aer([record], [parse_pharaoh("0-0")], rows="both")
    with pytest.raises(ValueError, match="layer must be"):
        layer_word_attention(record, 1)


def test_corpus_aer_matches_single_traces(tiny_model):
    pairs = make_pairs(5, seed=11)
    sources, references = [en for en, _ in pairs], [de for _, de in pairs]
    # a monotone gold alignment of the first min(words) words: enough to exercise the counts
    gold = [parse_pharaoh(" ".join(f"{i}-{i}" for i in range(min(len(en.split()), len(de.split())))))
            for en, de in pairs]
    batched = corpus_aer(tiny_model, sources, references, gold)
    cfg = tiny_model.config
    assert len(batched) == cfg.decoder_layers * (cfg.heads + 1)
    traces = [tiny_model.trace(en, target=de) for en, de in pairs]
    single = attention_aer(traces, gold)
    np.testing.assert_allclose(batched["aer"], single["aer"], atol=1e-9)
    assert ((batched["aer"] >= 0) & (batched["aer"] <= 1)).all()
    with pytest.raises(ValueError, match="5 source sentences but 4 gold"):
        corpus_aer(tiny_model, sources, references, gold[:4])
