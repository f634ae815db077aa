"""The data root: configs name corpora relative to it, paths still work, a missing data set names the command that
fetches it, and nothing the project ships names ../shared or a path of a machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.data import make_pairs, write_split

from viz_model.cli.main import main
from viz_model.config import CorpusConfig, TrainConfig
from viz_model.config.data_root import data_root, is_data_set_name, resolve_data_dir, user_data_folder
from viz_model.data.catalogue import by_folder
from viz_model.data.textfiles import DataError
from viz_model.train.corpora import load_corpora

REPO = Path(__file__).resolve().parents[2]


def test_the_root_is_the_variable_else_the_user_data_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.delenv("VIZ_MODEL_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    if user_data_folder().parts[-2:] != ("viz-model", "data"):
        pytest.fail(f"unexpected user data folder {user_data_folder()}")
    import sys
    if sys.platform.startswith("linux"):
        assert data_root() == tmp_path / "home" / ".local" / "share" / "viz-model" / "data"
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
        assert data_root() == tmp_path / "xdg" / "viz-model" / "data"


@pytest.mark.parametrize("data_dir, name", [("multi30k", True), ("corpora/mine", True), ("/abs/multi30k", False),
                                            ("./multi30k", False), ("../shared/data/wmt", False), ("~/d", False),
                                            (".", False)])
def test_names_are_under_the_root_and_paths_as_given(monkeypatch, tmp_path, data_dir, name):
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path))
    assert is_data_set_name(data_dir) is name
    expected = tmp_path / data_dir if name else Path(data_dir).expanduser()
    assert resolve_data_dir(data_dir) == expected == CorpusConfig("c", data_dir, train="train").path


def test_the_shipped_configs_name_data_sets_the_catalogue_fetches():
    for path in sorted((REPO / "configs").glob("*.toml")):
        cfg = TrainConfig.from_toml(path)
        for corpus in cfg.corpus_list:
            assert is_data_set_name(corpus.data_dir) and by_folder(corpus.data_dir) is not None, (path, corpus)
    assert TrainConfig().data_dir == "multi30k"


def test_a_config_reads_its_corpus_under_the_root_and_by_absolute_path(monkeypatch, tmp_path):
    write_split(tmp_path / "root" / "captions", "train", make_pairs(8, seed=1))
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path / "root"))
    (relative,) = load_corpora(TrainConfig(data_dir="captions", test_prefixes=(), val_prefix="train"))
    (absolute,) = load_corpora(TrainConfig(data_dir=str(tmp_path / "root" / "captions"), test_prefixes=(),
                                           val_prefix="train"))
    assert relative.train_src == absolute.train_src and len(relative.train_src) == 8


def test_a_missing_data_set_names_the_command_that_fetches_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("VIZ_MODEL_DATA", str(tmp_path))
    with pytest.raises(DataError) as err:
        load_corpora(TrainConfig.from_toml(REPO / "configs" / "mixed-en-de.toml"))
    assert str(err.value) == (f"{tmp_path / 'multi30k'}: data directory not found; `viz-model data fetch multi30k` "
                              "downloads it there, or set $VIZ_MODEL_DATA to the folder that holds multi30k/")
    cfg = REPO / "configs" / "multi30k-en-de.toml"
    assert main(["train", "--config", str(cfg), "--run-dir", str(tmp_path / "run")]) == 2
    assert "`viz-model data fetch multi30k`" in capsys.readouterr().err


# --- nothing shipped names ../shared or a path of this machine --------------------------------------------------
MACHINE_PATH = re.compile(r'\.\./shared|"shared"\s*/\s*"data"|(?<![\w.~-])/(?:work|root|home|tmp|farm|Users|mnt)/')


def shipped_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "mkdocs.yml", *sorted((REPO / "configs").glob("*.toml")),
             *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "benchmarks").glob("*.py")),
             *sorted((REPO / "benchmarks" / "results").glob("*.json")), *sorted(REPO.glob("assets/*/MODEL_CARD.md"))]
    return [f for f in files if f.is_file()]


def test_configs_benchmarks_docs_and_results_name_no_machine_path():
    found = [f"{path.relative_to(REPO)}:{i}: {line.strip()[:100]}" for path in shipped_files()
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if MACHINE_PATH.search(line)]
    assert found == []


@pytest.mark.parametrize("line, bad", [('"data": "Multi30K train (/work/shared/data/multi30k)"', True),
                                       ("default=REPO.parent / \"shared\" / \"data\"", True),
                                       ("--data-dir ../shared/data", True), ('"assets": "/tmp/opus"', True),
                                       ("viz-model data fetch multi30k --to ~/corpora", False),
                                       ("see https://example.org/home/page", False)])
def test_the_scan_finds_machine_paths(line, bad):
    assert bool(MACHINE_PATH.search(line)) is bad
