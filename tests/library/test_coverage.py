"""What a model was trained on and whether an input is within its reach (viz_model.modeldir.coverage)."""

from __future__ import annotations

import json
import shutil

import pytest

import viz_model
from viz_model.modeldir.coverage import (
    RARE_COUNT,
    TRAINING_STATS,
    CorpusStats,
    StatsError,
    TrainingStats,
    assess_input,
    load_training_stats,
    training_stats,
    word_confidences,
)
from viz_model.tokenization.tokenizer import EOS_ID, UNK_ID


def test_training_stats_count_every_source_piece(tokenizer):
    texts = {"multi30k": ["Two dogs play.", "A man runs."], "tatoeba": ["Two dogs play."]}
    stats = training_stats(tokenizer, texts)
    encoded = [tokenizer.encode(t) for group in texts.values() for t in group]
    assert stats.piece_counts[EOS_ID] == 3  # one </s> per sentence
    for piece in {i for ids in encoded for i in ids}:
        assert stats.piece_counts[piece] == sum(ids.count(piece) for ids in encoded)
    assert sum(stats.piece_counts) == sum(len(ids) + 1 for ids in encoded)
    assert stats.max_source_tokens == max(len(ids) + 1 for ids in encoded)
    assert [(c.name, c.domain, c.sentences) for c in stats.corpora] == [
        ("multi30k", "image captions", 2), ("tatoeba", "everyday sentences", 1)]
    assert stats.domains == ["image captions", "everyday sentences"] and stats.sentences == 3


def test_training_stats_round_trip_and_a_corpus_of_unknown_kind(tokenizer):
    stats = training_stats(tokenizer, {"my-corpus": ["Two dogs play."], "empty": []})
    assert [c.domain for c in stats.corpora] == ["my-corpus"]  # named by itself; an empty corpus is left out
    assert TrainingStats.from_dict(json.loads(stats.to_json())) == stats
    with pytest.raises(ValueError, match="at least one non-empty corpus"):
        training_stats(tokenizer, {"empty": []})


def stats_for(tokenizer, counts: dict[int, int], longest: int = 30) -> TrainingStats:
    piece_counts = [100] * tokenizer.vocab_size
    for piece, count in counts.items():
        piece_counts[piece] = count
    return TrainingStats([CorpusStats("multi30k", "image captions", 10)], piece_counts, longest, longest)


def test_an_input_within_reach_has_no_warning(tokenizer):
    result = assess_input(tokenizer, "Two dogs play in the snow.", stats_for(tokenizer, {}))
    assert result.warnings == [] and not result.out_of_reach and result.rare == [] and result.rare_share == 0


def test_rare_pieces_are_flagged_above_a_share(tokenizer):
    ids = tokenizer.encode("Two dogs play.")
    content = [i for i in ids if tokenizer.piece(i) != "▁"]
    rare = {content[0]: RARE_COUNT - 1, content[1]: 0, content[2]: 1}
    assert len(set(content[:3])) == 3 and 3 / len(content) > 0.25
    result = assess_input(tokenizer, "Two dogs play.", stats_for(tokenizer, rare))
    assert result.rare == [tokenizer.piece(i) for i in content[:3]]
    occurrences = sum(content.count(i) for i in content[:3])  # a rare piece counts each time it occurs
    assert result.rare_share == pytest.approx(occurrences / len(content))
    assert len(result.warnings) == 1 and f"{occurrences} of its {len(content)} pieces" in result.warnings[0]
    assert "rare or absent" in result.warnings[0]
    just_common = assess_input(tokenizer, "Two dogs play.", stats_for(tokenizer, {content[0]: RARE_COUNT}))
    assert just_common.rare == [] and just_common.warnings == []


def test_a_few_rare_pieces_are_listed_but_not_flagged(tokenizer):
    text = "Two dogs play in the snow with a man and a woman."
    ids = [i for i in tokenizer.encode(text) if tokenizer.piece(i) != "▁"]
    result = assess_input(tokenizer, text, stats_for(tokenizer, {ids[0]: 1}))
    assert result.rare == [tokenizer.piece(ids[0])] and result.rare_share < 0.25 and result.warnings == []


def test_unknown_characters_and_length_are_flagged(tokenizer):
    result = assess_input(tokenizer, "Two dogs ☃ play ☃.", stats_for(tokenizer, {}, longest=4))
    assert result.unknown == ["☃"] and UNK_ID in tokenizer.encode("☃")
    assert any("never seen (☃)" in w for w in result.warnings)
    assert any(f"It is {result.tokens} tokens long; the longest training sentence had 4" in w
               for w in result.warnings)
    without_stats = assess_input(tokenizer, "Two dogs ☃ play.", None)
    assert without_stats.unknown == ["☃"] and len(without_stats.warnings) == 1 and without_stats.rare == []


def test_a_warning_counts_every_unknown_character_it_does_not_list(tokenizer):
    """A Chinese sentence has more unknown characters than a warning lists by name: the rest are counted, so the
    number and the list agree (issue 38: "11 character(s)" listed 10)."""
    text = "我的祖母每个星期天早上烤面包。"
    result = assess_input(tokenizer, text, None)
    assert len(result.unknown) == len(set(text)) > 10
    warning = result.warnings[0]
    start = warning.index("never seen (") + len("never seen (")
    listed = warning[start:warning.index("):", start)]
    assert warning.startswith(f"{len(result.unknown)} character(s)")
    assert listed.split(" and ")[0].split() == result.unknown[:10]
    assert listed.endswith(f"and {len(result.unknown) - 10} more")


def test_word_confidences_take_the_least_likely_piece():
    pieces = ["▁Zwei", "▁Hund", "e", "▁spielen", ".", "</s>"]
    words = word_confidences(pieces, [0.9, 0.8, 0.3, 0.7, 0.95, 0.99])
    assert [(w.text, w.probability) for w in words] == [
        ("Zwei", 0.9), ("Hunde", 0.3), ("spielen.", 0.7), ("</s>", 0.99)]
    with pytest.raises(ValueError, match="3 pieces but 2 probabilities"):
        word_confidences(["a", "b", "c"], [0.1, 0.2])


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot be read as JSON"),
    ('{"corpora": []}', "not a training statistics file"),
    ('{"corpora": [{"name": "a", "domain": "b", "sentences": "x"}], "piece_counts": [], '
     '"max_source_tokens": 3, "p99_source_tokens": 3}', "not a training statistics file"),
    ('{"corpora": [], "piece_counts": [1], "max_source_tokens": 3, "p99_source_tokens": 3}', "empty corpus list"),
])
def test_a_broken_stats_file_is_an_error_naming_it(tmp_path, content, message):
    (tmp_path / TRAINING_STATS).write_text(content)
    with pytest.raises(StatsError, match=message) as err:
        load_training_stats(tmp_path)
    assert TRAINING_STATS in str(err.value)
    assert load_training_stats(tmp_path / "elsewhere") is None


def test_the_model_loads_its_stats_and_serves_without_a_broken_file(tmp_path, model_dir, tokenizer):
    directory = shutil.copytree(model_dir, tmp_path / "model")
    assert viz_model.load(directory).training_stats is None
    stats = training_stats(tokenizer, {"multi30k": ["Two dogs play."]})
    (directory / TRAINING_STATS).write_text(stats.to_json())
    model = viz_model.load(directory)
    assert model.training_stats == stats
    assert model.assess("Two dogs ☃.").unknown == ["☃"]
    with pytest.raises(ValueError, match="empty"):
        model.assess("  ")
    (directory / TRAINING_STATS).write_text("{broken")
    with pytest.warns(UserWarning, match="input checks against the training data are off"):
        model = viz_model.load(directory)
    assert model.training_stats is None and model.translate("Two dogs play.", beam=1)
    short = TrainingStats(stats.corpora, stats.piece_counts[:5], 3, 3)
    (directory / TRAINING_STATS).write_text(short.to_json())
    with pytest.warns(UserWarning, match="5 piece counts for a vocabulary of"):
        assert viz_model.load(directory).training_stats is None


def test_a_stats_file_linking_out_of_the_model_directory_is_refused(tmp_path, tokenizer):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(training_stats(tokenizer, {"multi30k": ["Two dogs play."]}).to_json())
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / TRAINING_STATS).symlink_to(outside)
    with pytest.raises(StatsError, match="outside the model directory"):
        load_training_stats(directory)
