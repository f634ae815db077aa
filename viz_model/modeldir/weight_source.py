"""The weights of an imported language model read where they are: ``weight_source.json`` names the source folder's
safetensors files (with each one's size and modification time, so a changed or missing file is refused in one
line), and `mapped_tensors` maps them into memory without a copy."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

WEIGHT_SOURCE = "weight_source.json"
MAX_SOURCE_BYTES = 1024**2
FORMAT = 1


class WeightSourceError(ValueError):
    """The recorded source of a model directory's weights is missing, changed or malformed."""


@dataclass(frozen=True)
class WeightSource:
    """Where a model directory's weights are read.

    :ivar folder: the source folder (the import records it absolute; a relative one is read from the directory)
    :ivar files: each safetensors file's name in it, with its size in bytes and modification time (ns) at import
    :ivar model_type: the source config's ``model_type`` (which family's names the tensors have)
    :ivar digests: the config's and tokenizer's SHA-256 digests at import (as a weights file's metadata holds them)
    """

    folder: Path
    files: tuple[tuple[str, int, int], ...]
    model_type: str
    digests: dict[str, str]

    @property
    def paths(self) -> list[Path]:
        return [self.folder / name for name, _, _ in self.files]

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "folder": str(self.folder), "model_type": self.model_type,
                           "files": [{"name": n, "bytes": b, "mtime_ns": t} for n, b, t in self.files],
                           **self.digests}, indent=2) + "\n"


def stamped(folder: Path, names: list[str], model_type: str, digests: dict[str, str]) -> WeightSource:
    """The `WeightSource` of the files `names` of `folder` as they are now."""
    folder = folder.resolve()
    files = tuple((name, (stat := (folder / name).stat()).st_size, stat.st_mtime_ns) for name in names)
    return WeightSource(folder, files, model_type, digests)


def plain_name(name: object, where: Path) -> str:
    """`name` when it is a file name without a folder part; else one line naming `where`."""
    if not isinstance(name, str) or not name or os.sep in name or "/" in name or name in (".", ".."):
        raise WeightSourceError(f"{where}: {name!r} is not a file name inside the source folder")
    return name


def read_weight_source(directory: Path) -> WeightSource:
    """The directory's `WeightSource`, each file checked as unchanged since the import; one line otherwise."""
    path = directory / WEIGHT_SOURCE
    try:
        if path.stat().st_size > MAX_SOURCE_BYTES:
            raise WeightSourceError(f"{path}: larger than {MAX_SOURCE_BYTES:,} bytes (a damaged or foreign file?)")
        data = json.loads(path.read_text(encoding="utf-8"))
        files = tuple((plain_name(f["name"], path), int(f["bytes"]), int(f["mtime_ns"])) for f in data["files"])
        folder = directory / Path(data["folder"])  # an absolute path as it is; a relative one from `directory`
        source = WeightSource(folder, files, str(data["model_type"]),
                              {k: str(v) for k, v in data.items() if k.endswith("_sha256")})
    except (OSError, ValueError, KeyError, TypeError) as err:
        if isinstance(err, WeightSourceError):
            raise
        raise WeightSourceError(f"{path}: cannot be read ({type(err).__name__}: {err})") from None
    if not source.files:
        raise WeightSourceError(f"{path}: names no weight file")
    for (_, size, mtime), file in zip(source.files, source.paths):
        if not file.is_file():
            raise WeightSourceError(f"{file}: missing; this model directory reads its weights there (restore the "
                                    "file, or import the model again)")
        stat = file.stat()
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime):
            raise WeightSourceError(f"{file}: changed since the import (size or time differs); import the model "
                                    "again")
    return source


def mapped_tensors(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Every tensor of the safetensors files `paths`, memory-mapped (nothing read until used); one line naming the
    file that is no safetensors file, or a tensor two files hold."""
    tensors: dict[str, torch.Tensor] = {}
    for path in paths:
        try:
            with safe_open(str(path), framework="pt") as f:
                names = f.keys()  # safe_open is no mapping
                for name in names:
                    if name in tensors:
                        raise WeightSourceError(f"{path}: {name} is in another weight file too")
                    tensors[name] = f.get_tensor(name)
        except (SafetensorError, OSError, RuntimeError) as err:
            raise WeightSourceError(f"{path}: not a valid safetensors file (truncated or corrupt?): {err}") from None
    return tensors
