"""The model directories `load()` and the explorer find by name: the shipped models, or the folders
``VIZ_MODEL_ASSETS`` lists."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
PACKAGED_ASSETS = PACKAGE / "_assets"  # an installed wheel's copy of the default model, the LM and the encoder
# the shipped models: the wheel's copy when installed, the repository's assets/ in a clone (editable install)
ASSETS_DIR = PACKAGED_ASSETS if PACKAGED_ASSETS.is_dir() else PACKAGE.parent / "assets"
DEFAULT_MODEL = "mixed-en-de"  # captions + everyday sentences; "multi30k-en-de": captions only
"""The model `load()` opens without a path: the shipped captions + everyday sentences English-German model."""
SHIPPED_LANGUAGE_MODEL = "multi30k-lm-en"
"""The shipped language model: a small decoder-only Transformer trained on Multi30K's English captions."""
SHIPPED_ENCODER = "multi30k-mlm-en"
"""The shipped encoder: a small encoder-only masked language model trained on Multi30K's English captions."""


def asset_roots() -> list[Path]:
    """The folders whose model directories the app and `load()` find: those ``VIZ_MODEL_ASSETS`` lists (several
    separated by ``os.pathsep``; the first holding a name wins), else the shipped models' folder."""
    value = os.environ.get("VIZ_MODEL_ASSETS")
    return [Path(part) for part in value.split(os.pathsep) if part] if value else [ASSETS_DIR]


def available_models(assets: str | Path | None = None) -> list[str]:
    """Names of the model directories (holding a config.json) in `assets` (default: every folder of
    `asset_roots`, a name once), default model first."""
    names: list[str] = []
    for root in [Path(assets)] if assets else asset_roots():
        if root.is_dir():
            names += sorted(p.name for p in root.iterdir() if p.name not in names and p.is_dir()
                            and not p.is_symlink() and (p / "config.json").is_file())
    return sorted(names, key=lambda n: n != DEFAULT_MODEL)


def named_model(path: str | Path) -> str | Path:
    """`path`, or the model directory of `asset_roots` that a bare name (``multi30k-lm-en``) that is no folder here
    names."""
    if isinstance(path, str) and path and "/" not in path and os.sep not in path and not Path(path).exists():
        root = model_root(path)
        if root is not None:
            return root / path
    return path


def model_root(name: str) -> Path | None:
    """The folder of `asset_roots` whose model directory `name` is found first, or None."""
    return next((root for root in asset_roots() if name in available_models(root)), None)
