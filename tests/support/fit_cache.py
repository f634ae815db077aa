"""Folders of models fitted by transformers, kept on disk by what makes them (the recipe, the support code that fits
them, the versions of torch and transformers): fitted once, then read back by later runs and by the other worker."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).parents[1]


def cache_dir(request, tmp_path_factory, name: str) -> Path:
    """The folder `name` in pytest's cache folder (a run without the cache plugin: a fresh one, fitted afresh)."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir(name) if cache else tmp_path_factory.mktemp(name)


def cached_folder(cache: Path, name: str, recipe: list, make: Callable[[Path], None],
                  code: tuple[str, ...] = (), made: str = "config.json") -> Path:
    """The folder `name` that `make(folder)` writes (the file `made`, a config.json by default, among its files),
    under `cache` by a hash of `recipe`, of the files `code` names (under tests/, such as "support/hf_lm_fit.py") and
    of the versions of torch and transformers: made where it is not there yet."""
    import torch
    import transformers

    sources = [(TESTS / path).read_text() for path in code]
    made_by = [recipe, sources, torch.__version__, transformers.__version__]
    key = hashlib.sha256(json.dumps(made_by, sort_keys=True, default=str).encode()).hexdigest()[:16]
    folder = cache / key / name
    if (folder / made).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{name}-"))
    try:
        make(staging)
    except BaseException:  # a failure or a skip (data not there): nothing left behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        os.replace(staging, folder)  # whole or not at all, should another worker make it too
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
