"""The training log and a second model's config.json are read under the same checks as every model file (inside
the directory, no link out of it, a size cap), on the pages that read them (issue 24)."""

from __future__ import annotations

import shutil
from pathlib import Path

from streamlit.testing.v1 import AppTest
from support.app import APP, TINY_MODEL, switch_to  # noqa: E402

from viz_model.lessons import lesson_inputs, pe_tables, training_recipe  # noqa: E402


def open_training_page(assets: Path) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params.update({"beam": "1", "sentence": "Two dogs play."})
    at.run()
    return switch_to(at, "training").run()


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
    assert pe_tables.training_max_length(tmp_path / TINY_MODEL, None)[0] is None  # the linked file's 7 is not used


def test_an_oversized_training_log_is_refused(tiny, tmp_path):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    log = tmp_path / TINY_MODEL / "training_log.jsonl"
    with log.open("wb") as f:
        f.truncate(64 * 1024**2 + 1)
    try:
        training_recipe.training_events(tmp_path / TINY_MODEL)
    except lesson_inputs.InputError as err:
        assert "training_log.jsonl" in str(err) and "more than" in str(err)
    else:
        raise AssertionError("an oversized log was read")


def test_a_second_models_config_linking_out_is_skipped(tiny, tmp_path):
    shutil.copytree(tiny / TINY_MODEL, tmp_path / TINY_MODEL)
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "config.json").symlink_to(tiny / TINY_MODEL / "config.json")
    kinds = pe_tables.positional_kinds(tmp_path, [TINY_MODEL, "linked"])
    assert kinds == {TINY_MODEL: "sinusoidal"}


def test_models_from_several_folders_are_offered_and_served(tiny, tmp_path, monkeypatch):
    """VIZ_MODEL_ASSETS with two folders (what `viz-model app --models DIR` passes): the picker offers the models of
    both, the first folder wins a name both have, and a model of the second folder translates and draws."""
    import os

    import viz_model

    second = tmp_path / "mine"
    shutil.copytree(tiny / TINY_MODEL, second / "my-model")
    shutil.copytree(tiny / TINY_MODEL, second / TINY_MODEL)  # the same name as the first folder's
    (second / TINY_MODEL / "MODEL_CARD.md").write_text("# the second folder's copy\n")
    monkeypatch.setenv("VIZ_MODEL_ASSETS", os.pathsep.join([str(tiny), str(second)]))
    assert viz_model.available_models() == [TINY_MODEL, "my-model"]  # folder by folder
    model_root = viz_model.modeldir.shipped.model_root
    assert model_root(TINY_MODEL) == tiny and model_root("my-model") == second
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.query_params.update({"beam": "1", "sentence": "Two dogs play.", "model": "my-model"})
    at.run()
    assert not at.exception and at.selectbox(key="w_model").value == "my-model"
    assert sorted(at.selectbox(key="w_model").options) == sorted((TINY_MODEL, "my-model"))
    assert at.get("plotly_chart")
