"""Hub ids imported on first use into a cache of model directories (``$VIZ_MODEL_CACHE``, else
``~/.cache/viz-model``), one directory ``owner--name`` per id, reused afterwards."""

from __future__ import annotations

import os
from pathlib import Path

from .importer import HUB_ID, import_model

CACHE_ENV = "VIZ_MODEL_CACHE"


def cache_root() -> Path:
    """Where imported hub models are kept: ``$VIZ_MODEL_CACHE``, else ``~/.cache/viz-model``."""
    value = os.environ.get(CACHE_ENV)
    return Path(value) if value else Path.home() / ".cache" / "viz-model"


def is_hub_id(source: str) -> bool:
    """Whether `source` reads as a hub id ``owner/name`` (and is no folder here)."""
    return HUB_ID.fullmatch(source) is not None and not Path(source).is_dir()


def cached_import(hub_id: str) -> Path:
    """The model directory of `hub_id` in `cache_root`, imported first if it is not there (`HFImportError` in one
    line when the hub cannot be reached or huggingface_hub is not installed, naming what to do)."""
    directory = cache_root() / hub_id.replace("/", "--")
    if not directory.is_dir():
        import_model(hub_id, directory)
    return directory
