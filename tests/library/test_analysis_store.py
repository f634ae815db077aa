"""The precomputed analysis tables of a model directory (viz_model.analysis.store) and `viz-model importance`."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest
from support.cli import assert_user_error, run
from support.data import make_pairs, write_corpus, write_lines

from viz_model.analysis import store
from viz_model.analysis.ablation import all_heads, head_importance, layer_counts
from viz_model.analysis.corpus_attention import analyze_corpus
from viz_model.analysis.head_stats import STATISTICS
from viz_model.modeldir.checkpoint import CheckpointError

PAIRS = make_pairs(5, seed=31)
TEXTS, REFS = [en for en, _ in PAIRS], [de for _, de in PAIRS]


@pytest.fixture
def directory(tmp_path, model_dir):
    """A private copy of the tiny model directory (tests write analysis/ into it)."""
    return shutil.copytree(model_dir, tmp_path / "model")


@pytest.fixture(scope="module")
def analysis(tiny_model):
    return analyze_corpus(tiny_model, TEXTS)


@pytest.fixture(scope="module")
def importance(tiny_model):
    return head_importance(tiny_model, TEXTS[:2], REFS[:2])


def test_no_tables_is_none(directory, tiny_model):
    assert store.read_head_stats(directory, tiny_model.config) is None
    assert store.read_head_importance(directory, tiny_model.config) is None
    assert store.read_head_stats_sentences(directory) is None


def test_written_tables_read_back(directory, tiny_model, analysis, importance):
    store.write_head_stats(directory, analysis)
    store.write_head_importance(directory, importance)
    assert (directory / store.HEAD_STATS_FILE).is_file() and (directory / store.HEAD_IMPORTANCE_FILE).is_file()
    stats = store.read_head_stats(directory, tiny_model.config)
    pd.testing.assert_frame_equal(stats, analysis.heads, check_dtype=False, atol=1e-9)
    examples = set(analysis.heads["example_sentence"].dropna().astype(int))
    assert store.read_head_stats_sentences(directory) == [t if i in examples else "" for i, t in enumerate(TEXTS)]
    assert examples - {-1} and examples - {-1} <= set(range(len(TEXTS)))  # -1: a head without an example
    pd.testing.assert_frame_equal(store.read_head_importance(directory, tiny_model.config), importance,
                                  check_dtype=False, atol=1e-9)


def test_roles_are_filled_in_when_the_file_has_only_statistics(directory, tiny_model, analysis):
    (directory / store.ANALYSIS_DIR).mkdir()
    analysis.heads[["kind", "layer", "head", *STATISTICS]].to_csv(directory / store.HEAD_STATS_FILE, index=False)
    stats = store.read_head_stats(directory, tiny_model.config)
    assert list(stats["role"]) == list(analysis.heads["role"]) and (stats["example_sentence"] == -1).all()


def _write(directory, name: str, text: str) -> None:
    (directory / store.ANALYSIS_DIR).mkdir(exist_ok=True)
    (directory / name).write_text(text, encoding="utf-8")


@pytest.mark.parametrize("text, match", [
    ("", "not a readable CSV table"),
    ("kind,layer,head\nencoder,0,0\n", "columns nll_rise are missing"),
    ("kind,layer,head,nll_rise\n", "has no rows"),
    ("kind,layer,head,nll_rise\nattention,0,0,0.1\n", "unknown attention kind 'attention'"),
    ("kind,layer,head,nll_rise\nencoder,0.5,0,0.1\n", "'layer' must hold whole numbers"),
    ("kind,layer,head,nll_rise\nencoder,0,-1,0.1\n", "'head' must hold whole numbers"),
    ("kind,layer,head,nll_rise\nencoder,0,0,abc\n", "'nll_rise' must hold numbers"),
    ("kind,layer,head,nll_rise\nencoder,0,0,0.1\nencoder,0,0,0.2\n", "appears more than once"),
    ("kind,layer,head,nll_rise\nencoder,99,0,0.1\n", r"encoder layer 99 head 0 \(0-based\) does not exist"),
    ('kind,layer,head,nll_rise\n"encoder,0,0,0.1\n', "not a readable CSV table"),
])
def test_bad_importance_tables_name_the_file(directory, tiny_model, text, match):
    _write(directory, store.HEAD_IMPORTANCE_FILE, text)
    with pytest.raises(CheckpointError, match=match) as error:
        store.read_head_importance(directory, tiny_model.config)
    assert str(directory / store.HEAD_IMPORTANCE_FILE) in str(error.value)


def test_bad_head_stats_tables(directory, tiny_model, analysis):
    _write(directory, store.HEAD_STATS_FILE, "kind,layer,head,entropy\nencoder,0,0,1.0\n")
    with pytest.raises(CheckpointError, match="columns .*same.* are missing"):
        store.read_head_stats(directory, tiny_model.config)
    table = analysis.heads.assign(example_sentence="first")
    table.to_csv(directory / store.HEAD_STATS_FILE, index=False)
    with pytest.raises(CheckpointError, match="example_sentence"):
        store.read_head_stats(directory, tiny_model.config)
    (directory / store.HEAD_STATS_FILE).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError, match="head_stats.csv: not a readable CSV table"):
        store.read_head_stats(directory, tiny_model.config)


def test_links_out_of_the_directory_and_huge_files_are_refused(directory, tmp_path, tiny_model, importance):
    outside = tmp_path / "elsewhere.csv"
    importance.to_csv(outside, index=False)
    (directory / store.ANALYSIS_DIR).mkdir()
    os.symlink(outside, directory / store.HEAD_IMPORTANCE_FILE)
    with pytest.raises(CheckpointError, match="outside the model directory"):
        store.read_head_importance(directory, tiny_model.config)
    (directory / store.HEAD_IMPORTANCE_FILE).unlink()
    with (directory / store.HEAD_IMPORTANCE_FILE).open("wb") as f:
        f.truncate(store.MAX_TABLE_BYTES + 1)
    with pytest.raises(CheckpointError, match="more than the"):
        store.read_head_importance(directory, tiny_model.config)


# --- viz-model importance ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("importance"), PAIRS)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cli_importance_writes_one_row_per_head(capsys, tmp_path, model_dir, tiny_model, corpus_files, suffix):
    src, ref = corpus_files
    out = tmp_path / f"importance{suffix}"
    code, stdout, stderr = run(capsys, "importance", "--model", model_dir, "--src", src, "--tgt", ref, "--out", out,
                               "--limit", "3", "--device", "cpu")
    assert code == 0, stderr
    table = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert len(table) == len(all_heads(tiny_model.config))
    expected = head_importance(tiny_model, TEXTS[:3], REFS[:3])
    np.testing.assert_allclose(table["nll_rise"], expected["nll_rise"], rtol=1e-6, atol=1e-9)
    assert "nll_rise" in stdout and f"wrote {out}" in stderr and "3 sentences" in stderr


def test_cli_importance_into_the_model_directory_is_what_the_app_reads(capsys, directory, tiny_model, corpus_files):
    src, ref = corpus_files
    out = directory / store.HEAD_IMPORTANCE_FILE
    out.parent.mkdir()
    code, _, stderr = run(capsys, "importance", "--model", directory, "--src", src, "--tgt", ref, "--out", out,
                          "--limit", "2", "--bleu", "--device", "cpu")
    assert code == 0, stderr
    table = store.read_head_importance(directory, tiny_model.config)
    assert {"bleu", "bleu_drop"} <= set(table.columns)
    counts = layer_counts(tiny_model.config)
    assert (table.groupby("kind")["layer"].max() + 1).to_dict() == counts


def test_cli_importance_errors(capsys, tmp_path, model_dir, corpus_files):
    src, ref = corpus_files
    short = write_lines(tmp_path / "short.de", REFS[:2])
    bad = write_lines(tmp_path / "bad.de", [*REFS[:-1], "Ein \x07 Hund."])
    out = tmp_path / "importance.csv"
    base = ["importance", "--model", model_dir, "--device", "cpu", "--src", src]
    assert_user_error(capsys, [*base, "--tgt", ref, "--out", tmp_path / "i.xlsx"], "use .csv or .parquet")
    assert_user_error(capsys, [*base, "--tgt", ref, "--out", tmp_path / "no" / "i.csv"], "does not exist")
    assert_user_error(capsys, [*base, "--tgt", tmp_path / "missing.de", "--out", out], "missing.de", "not found")
    assert_user_error(capsys, [*base, "--tgt", short, "--out", out], "has 2 lines but", f"has {len(TEXTS)}")
    assert_user_error(capsys, [*base, "--tgt", bad, "--out", out], f"bad.de line {len(TEXTS)}", "control characters")
    assert_user_error(capsys, [*base, "--tgt", ref, "--out", out, "--limit", "0"], "--limit must be at least 1")
    assert_user_error(capsys, [*base, "--tgt", ref, "--out", out, "--beam", "0"], "beam")
    assert not out.exists()
    with pytest.raises(SystemExit):  # --tgt is required: argparse's usage error
        run(capsys, *base, "--out", out)


def test_cli_importance_of_a_language_model_is_what_its_ablation_page_reads(capsys, tmp_path):
    """The Ablation page tells a language model's user to run `viz-model importance`: it must take one (CPU, fp32):
    prompts in --src, their continuations in --tgt."""
    import viz_model
    from viz_model.modeldir.shipped import ASSETS_DIR, SHIPPED_LANGUAGE_MODEL

    directory = tmp_path / "lm"
    shutil.copytree(ASSETS_DIR / SHIPPED_LANGUAGE_MODEL, directory)
    prompts, continuations = ["A man in a blue shirt is", "Two dogs"], ["riding a bike.", "play in the snow."]
    src = write_lines(tmp_path / "prompts.txt", prompts)
    tgt = write_lines(tmp_path / "continuations.txt", continuations)
    out = directory / store.HEAD_IMPORTANCE_FILE
    out.parent.mkdir()
    code, _, stderr = run(capsys, "importance", "--model", directory, "--src", src, "--tgt", tgt, "--out", out,
                          "--device", "cpu")
    assert code == 0, stderr
    model = viz_model.load(directory, device="cpu")
    table = store.read_head_importance(directory, model.config)
    expected = head_importance(model, prompts, continuations)
    assert len(table) == len(all_heads(model.config)) and set(table["kind"]) == {"decoder"}
    np.testing.assert_allclose(table["nll_rise"], expected["nll_rise"], rtol=1e-6, atol=1e-9)
