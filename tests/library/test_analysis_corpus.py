"""Corpus-level attention analysis (viz_model.analysis.corpus_attention, teacher-forced batches, tables),
`viz-model analyze`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support.cli import assert_user_error, run
from support.data import make_pairs, write_corpus, write_lines

from viz_model.analysis.corpus_attention import analyze_corpus, iter_attentions
from viz_model.analysis.head_stats import STATISTICS, corpus_statistics, head_roles, sentence_statistics
from viz_model.analysis.tables import write_table
from viz_model.data.batching import length_batches
from viz_model.search.forced import sequence_log_probs

PAIRS = make_pairs(7, seed=21) + [("A dog.", "Ein Hund."), ("Hello", "Hallo")]  # short ones: padding in batches
TEXTS, REFS = [en for en, _ in PAIRS], [de for _, de in PAIRS]


def heads_in(config) -> int:
    return (config.encoder_layers + 2 * config.decoder_layers) * config.heads


def test_length_batches_by_hand():
    assert length_batches([5, 1, 3, 3], 6) == [[1, 2], [3], [0]]  # 3 x 2 = 6 fits, 3 x 3 and 5 x 2 do not
    assert length_batches([9], 4) == [[0]]  # too long alone: a batch of its own
    with pytest.raises(ValueError, match="batch_tokens"):
        length_batches([1], 0)


def assert_same_maps(record, trace):
    assert record.source_ids == trace.source_ids and record.output_ids == trace.output_ids
    assert record.source_tokens == trace.source_tokens and record.target_tokens == trace.target_tokens
    for kind in ("encoder", "decoder", "cross"):
        ours, theirs = getattr(record, f"{kind}_attentions"), trace.attentions(kind)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("batch_tokens", [40, 3000])  # several batches / one padded batch
def test_batched_maps_equal_single_traces(tiny_model, batch_tokens):
    forced = list(iter_attentions(tiny_model, TEXTS, REFS, batch_tokens=batch_tokens))
    assert sorted(r.index for r in forced) == list(range(len(TEXTS)))
    for record in forced:
        assert_same_maps(record, tiny_model.trace(TEXTS[record.index], target=REFS[record.index]))
    translated = list(iter_attentions(tiny_model, TEXTS, beam=2, batch_tokens=batch_tokens))
    for record in translated:
        assert_same_maps(record, tiny_model.trace(TEXTS[record.index], beam=2))


def test_sequence_log_probs_equal_the_traces(tiny_model):
    traces = [tiny_model.trace(en, target=de) for en, de in PAIRS]
    got = sequence_log_probs(tiny_model.network, [t.source_ids for t in traces], [t.output_ids for t in traces],
                             batch_tokens=50)
    np.testing.assert_allclose(got, [t.log_probability for t in traces], atol=1e-4)


def test_analyze_corpus_equals_statistics_of_traces(tiny_model):
    analysis = analyze_corpus(tiny_model, TEXTS, limit=5)
    assert analysis.sources == TEXTS[:5] and not analysis.forced
    assert analysis.outputs == tiny_model.translate(TEXTS[:5], beam=1)
    traces = [tiny_model.trace(t, beam=1) for t in TEXTS[:5]]
    expected = sentence_statistics(traces)
    pd.testing.assert_frame_equal(analysis.per_sentence, expected, atol=1e-5, check_dtype=False)
    heads = analysis.heads
    assert len(heads) == heads_in(tiny_model.config)
    assert list(heads.columns[:4]) == ["kind", "layer", "head", "sentences"] and (heads["sentences"] == 5).all()
    pd.testing.assert_frame_equal(heads, head_roles(corpus_statistics(expected), expected), atol=1e-5,
                                  check_dtype=False)
    summary = analysis.summary()
    assert summary["heads"].sum() == len(heads)
    examples = summary[summary["example_sentence"] >= 0]
    assert all(TEXTS[i] == text for i, text in zip(examples["example_sentence"], examples["example_text"]))


def test_analyze_corpus_forced(tiny_model):
    analysis = analyze_corpus(tiny_model, pd.Series(TEXTS), pd.Series(REFS))  # any iterable of strings
    assert analysis.forced and analysis.outputs == REFS
    assert set(analysis.per_sentence["sentence"]) == set(range(len(TEXTS)))


@pytest.mark.parametrize("sources, references, kwargs, match", [
    ([], None, {}, "no source sentences"),
    ("A dog.", None, {}, "list of sentences"),
    (["A dog.", "A cat."], ["Ein Hund."], {}, "2 source sentences but 1 references"),
    (["A dog.", " "], None, {}, "source sentence 2 is empty"),
    (["A dog."], ["Ein\x00Hund."], {}, "reference 1 contains control characters"),
    (["A dog."], None, {"limit": 0}, "limit"),
    (["A dog."], None, {"beam": 0}, "beam"),
])
def test_analyze_corpus_errors(tiny_model, sources, references, kwargs, match):
    with pytest.raises(ValueError, match=match):
        analyze_corpus(tiny_model, sources, references, **kwargs)


def test_write_table(tmp_path):
    table = pd.DataFrame({"kind": ["cross"], "layer": [0], "head": pd.array([None], dtype="Int64"), "aer": [0.5]})
    pd.testing.assert_frame_equal(pd.read_parquet(write_table(table, tmp_path / "t.parquet")), table)
    assert pd.read_csv(write_table(table, tmp_path / "t.csv")).iloc[0]["aer"] == 0.5
    for path, match in [(tmp_path / "t.xlsx", "use .csv or .parquet"), (tmp_path / "t", "no suffix"),
                        (tmp_path / "missing" / "t.csv", "does not exist")]:
        with pytest.raises(ValueError, match=match):
            write_table(table, path)


# --- viz-model analyze ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("analyze"), PAIRS)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cli_analyze_writes_one_row_per_head(capsys, tmp_path, model_dir, tiny_model, corpus_files, suffix):
    src, _ = corpus_files
    out = tmp_path / f"heads{suffix}"
    code, stdout, stderr = run(capsys, "analyze", "--model", model_dir, "--src", src, "--out", out, "--limit", "4",
                               "--device", "cpu")
    assert code == 0, stderr
    table = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert len(table) == heads_in(tiny_model.config)
    assert set(STATISTICS) | {"kind", "layer", "head", "role", "role_score"} <= set(table.columns)
    assert (table["sentences"] == 4).all()
    expected = analyze_corpus(tiny_model, TEXTS, limit=4).summary()
    for role in expected["role"]:
        assert role in stdout
    assert f"wrote {out}" in stderr and "translated, beam 1" in stderr


def test_cli_analyze_forced(capsys, tmp_path, model_dir, tiny_model, corpus_files):
    src, ref = corpus_files
    out = tmp_path / "heads.csv"
    code, _, stderr = run(capsys, "analyze", "--model", model_dir, "--src", src, "--tgt", ref, "--out", out,
                          "--device", "cpu")
    assert code == 0 and f"forced on {ref}" in stderr
    expected = analyze_corpus(tiny_model, TEXTS, REFS).heads
    np.testing.assert_allclose(pd.read_csv(out)["entropy"], expected["entropy"], rtol=1e-6)


def test_cli_analyze_errors(capsys, tmp_path, model_dir, corpus_files):
    src, ref = corpus_files
    empty = write_lines(tmp_path / "empty.en", [])
    short = write_lines(tmp_path / "short.de", REFS[:2])
    bad = write_lines(tmp_path / "bad.en", ["A dog.", "A \x07 cat."])
    out = tmp_path / "heads.csv"
    base = ["analyze", "--model", model_dir, "--device", "cpu"]
    assert_user_error(capsys, [*base, "--src", src, "--out", tmp_path / "heads.xlsx"], "use .csv or .parquet")
    assert_user_error(capsys, [*base, "--src", src, "--out", tmp_path / "no" / "h.csv"], "does not exist")
    assert_user_error(capsys, [*base, "--src", tmp_path / "missing.en", "--out", out], "missing.en", "not found")
    assert_user_error(capsys, [*base, "--src", empty, "--out", out], "empty.en is empty")
    assert_user_error(capsys, [*base, "--src", src, "--out", out, "--limit", "0"], "--limit must be at least 1")
    assert_user_error(capsys, [*base, "--src", src, "--tgt", short, "--out", out], "has 2 lines but",
                      f"has {len(TEXTS)}")
    assert_user_error(capsys, [*base, "--src", bad, "--out", out], "bad.en line 2", "control characters")
    assert_user_error(capsys, [*base, "--src", src, "--out", out, "--beam", "0"], "beam")
    assert not out.exists()
