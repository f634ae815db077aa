"""A checkpoint series folder's format (`viz_model.modeldir.series`): ``series.json`` naming the steps of its
``step-NNNNNN`` folders, or checkpoint folders named for their steps; what is wrong with one said in one line."""

from __future__ import annotations

import json

import pytest

from viz_model.modeldir.checkpoint import CheckpointError
from viz_model.modeldir.series import (
    SERIES_FILE,
    available_series,
    folder_series,
    is_series,
    read_steps,
    record_step,
    step_folder,
)


def test_recorded_steps_are_the_series_in_order(tmp_path):
    for step in (500, 0, 100):
        step_folder(tmp_path, step).mkdir(parents=True)
        record_step(tmp_path, step)
    record_step(tmp_path, 100)  # recorded again: once
    assert json.loads((tmp_path / SERIES_FILE).read_text()) == {
        "steps": [0, 100, 500], "folders": ["step-000000", "step-000100", "step-000500"]}
    series = folder_series(tmp_path)
    assert series.steps == (0, 100, 500) and series.place(100) == str(tmp_path / "step-000100")
    assert is_series(tmp_path)


def test_folders_named_for_their_steps_are_a_series_without_series_json(tmp_path):
    for name in ("checkpoint-20", "step_3", "step7", "notes", "checkpoint-x"):
        (tmp_path / name).mkdir()
    (tmp_path / "step9").write_text("a file, not a checkpoint folder")
    series = folder_series(tmp_path)
    assert series.steps == (3, 7, 20) and series.place(20) == str(tmp_path / "checkpoint-20")
    (tmp_path / "config.json").write_text("{}")  # a model folder of its own is no series
    assert not is_series(tmp_path)


@pytest.mark.parametrize(("content", "fragment"), [
    ("{", "unreadable"),
    ('{"steps": []}', '"steps" must be a non-empty list'),
    ('{"steps": [1, -2]}', '"steps" must be a non-empty list'),
    ('{"steps": [1, 1]}', "a step is named twice"),
    ('[1, 2]', '"steps" must be a non-empty list'),
])
def test_a_malformed_series_json_is_one_line(tmp_path, content, fragment):
    (tmp_path / SERIES_FILE).write_text(content)
    with pytest.raises(CheckpointError, match=fragment) as err:
        read_steps(tmp_path)
    assert "\n" not in str(err.value)


def test_a_missing_step_folder_or_no_step_at_all_is_one_line(tmp_path):
    (tmp_path / SERIES_FILE).write_text('{"steps": [0, 10]}')
    step_folder(tmp_path, 0).mkdir()
    with pytest.raises(CheckpointError, match=r"the folder of step 10 \(step-000010\) is missing"):
        folder_series(tmp_path)
    with pytest.raises(CheckpointError, match="not a checkpoint series"):
        folder_series(tmp_path / "step-000000")


def test_the_series_of_several_roots_are_found_once_each(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for root in (first, second):
        (root / "run" / "step-0").mkdir(parents=True)
    (second / "other" / "checkpoint-5").mkdir(parents=True)
    (first / "model").mkdir()
    (first / "model" / "config.json").write_text("{}")
    assert available_series([first, second, tmp_path / "missing"]) == {"run": first, "other": second}
