"""Published tokenizer files and configs kept as test data in ``tests/fixtures`` (the large ones gzip-compressed to
keep the repository small), unpacked into a test's temporary folder."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def unpacked(source: Path, folder: Path) -> Path:
    """A copy of the fixture folder `source` as `folder`, each ``*.gz`` file decompressed under its name without
    ``.gz``; returns `folder`."""
    shutil.copytree(source, folder)
    for packed in folder.glob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    return folder
