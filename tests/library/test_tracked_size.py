"""The tracked tree stays under 58 MiB (issue 52): the GPU machine takes at most 64 MiB of working tree per call, and
the shipped models are most of it. Runs on the CPU; needs no model."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 58 * 1024**2  # bytes: 60,817,408


def tracked_files() -> list[Path]:
    """Every file `git ls-files` lists (a file deleted but not yet committed counts as gone)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: there is no tracked tree to measure")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def test_the_tracked_tree_is_under_58_mib():
    sizes = {path: path.stat().st_size for path in tracked_files()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
    assert total <= LIMIT, (f"the tracked tree is {total:,} bytes, over {LIMIT:,} (58 MiB); largest: "
                            + ", ".join(f"{p.relative_to(ROOT)} {sizes[p]:,}" for p in largest))
