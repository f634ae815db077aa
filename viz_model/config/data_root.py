"""Where corpora live: the data root (``$VIZ_MODEL_DATA``, else a per-user data folder) and how a config's
``data_dir`` names a folder under it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA_ENV = "VIZ_MODEL_DATA"


def user_data_folder() -> Path:
    """The per-user data folder of viz-model (as platformdirs' user_data_dir): ``~/.local/share/viz-model/data`` on
    Linux (or under ``$XDG_DATA_HOME``), ``~/Library/Application Support/...`` on macOS, ``%LOCALAPPDATA%`` on
    Windows."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "viz-model" / "data"


def data_root() -> Path:
    """The folder the corpora are under: ``$VIZ_MODEL_DATA`` when set, else `user_data_folder()`."""
    value = os.environ.get(DATA_ENV, "")
    return Path(value).expanduser() if value else user_data_folder()


def is_data_set_name(data_dir: str) -> bool:
    """Whether a config's `data_dir` names a data set under the root (``multi30k``) rather than a path as given
    (absolute, ``~/...``, or starting ``./`` or ``../``)."""
    relative = data_dir in (".", "..") or data_dir.startswith(("./", "../", ".\\", "..\\"))
    return not (Path(data_dir).is_absolute() or data_dir.startswith("~") or relative)


def resolve_data_dir(data_dir: str) -> Path:
    """The folder a config's `data_dir` means: a data-set name is under `data_root()`; a path is taken as given
    (``~`` expanded; ``./`` and ``../`` relative to the working directory)."""
    return data_root() / data_dir if is_data_set_name(data_dir) else Path(data_dir).expanduser()
