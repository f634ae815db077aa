"""The shipped models as a user opens them: by name, from the repository's assets folder, offline."""

from __future__ import annotations

import pytest

import viz_model
from viz_model.kinds.base import ModelKind
from viz_model.modeldir.shipped import DEFAULT_MODEL


def open_by_name(name: str, tmp_path_factory: pytest.TempPathFactory) -> ModelKind:
    """The shipped model `name`, loaded by its name (not a folder of the working directory) on the CPU."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("VIZ_MODEL_ASSETS", raising=False)
        patch.chdir(tmp_path_factory.mktemp("elsewhere"))
        return viz_model.load(name, device="cpu")


def assert_listed_after_the_default(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`available_models()` lists `name`, the default translator first."""
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)
    names = viz_model.available_models()
    assert names[0] == DEFAULT_MODEL and name in names
