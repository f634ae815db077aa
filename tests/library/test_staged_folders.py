"""Imported and exported folders are written whole or not at all (`viz_model.hf.common.write_staged`), and as readable
as the umask allows: mkdtemp's private staging folder is not what lands. The tiny random model and a small random
GPT-2 built by transformers; CPU, fp32."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from viz_model.hf.common import HFImportError, write_staged
from viz_model.hf.exporter import HFExportError, export_hf


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes(folder: Path) -> set[tuple[str, int]]:
    return {(path.name if path != folder else ".", stat.S_IMODE(path.stat().st_mode))
            for path in (folder, *folder.iterdir())}


def test_an_exported_folder_is_readable_by_all(random_model_dir, tmp_path, umask_022):
    out = export_hf(random_model_dir, tmp_path / "marian")
    assert modes(out) == {(".", 0o755)} | {(p.name, 0o644) for p in out.iterdir()}


def test_an_imported_model_directory_is_readable_by_all(tmp_path, umask_022):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from support.hf_lm import build_lm_folder

    from viz_model.hf.importer import import_model

    out = import_model(str(build_lm_folder(tmp_path, "gpt2")), tmp_path / "lm")
    assert modes(out) == {(".", 0o755)} | {(p.name, 0o644) for p in out.iterdir()}


@pytest.mark.parametrize("error", [HFImportError, HFExportError])
def test_a_failed_write_leaves_nothing_and_says_so_in_its_caller_s_error(tmp_path, error):
    def write(staging: Path) -> None:
        (staging / "half.bin").write_bytes(b"x")
        raise OSError(28, "No space left on device")

    with pytest.raises(error, match=r"^.*/out: could not be written \(\[Errno 28\] No space left on device\)$"):
        write_staged(tmp_path / "out", write, error)
    assert list(tmp_path.iterdir()) == []
