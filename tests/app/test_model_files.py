"""The training log and a second model's config.json are read under the same checks as every model file (inside
the directory, no link out of it, a size cap), on the pages that read them (issue 24)."""

from __future__ import annotations

import shutil
from pathlib import Path

from streamlit.testing.v1 import AppTest
from support.app import APP, TINY_MODEL  # noqa: E402

from app import teaching  # noqa: E402


def open_training_page(assets: Path) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params.update({"beam": "1", "sentence": "Two dogs play."})
    at.run()
    return at.switch_page("views/training.py").run()


def test_a_training_log_linking_out_of_the_model_directory_is_not_read(tiny, tmp_path, monkeypatch):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"event": "start", "max_len": 7}\n')
    (tmp_path / TINY_MODEL / "training_log.jsonl").symlink_to(outside)
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(tmp_path))
    at = open_training_page(tmp_path)
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "The training log is not read" in warnings and "outside the model directory" in warnings
    assert teaching.training_max_length(tmp_path / TINY_MODEL, None)[0] is None  # the linked file's 7 is not used


def test_an_oversized_training_log_is_refused(tiny, tmp_path):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    log = tmp_path / TINY_MODEL / "training_log.jsonl"
    with log.open("wb") as f:
        f.truncate(64 * 1024**2 + 1)
    try:
        teaching.training_events(tmp_path / TINY_MODEL)
    except teaching.InputError as err:
        assert "training_log.jsonl" in str(err) and "more than" in str(err)
    else:
        raise AssertionError("an oversized log was read")


def test_a_second_models_config_linking_out_is_skipped(tiny, tmp_path):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "config.json").symlink_to(tiny / TINY_MODEL / "config.json")
    kinds = teaching.positional_kinds(tmp_path, [TINY_MODEL, "linked"])
    assert kinds == {TINY_MODEL: "sinusoidal"}
