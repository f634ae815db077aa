"""Reading text files: plain or gzip'ed UTF-8 lines, tab-separated references, the aligned halves of a split.

Errors are `DataError`s that name the file (and the line) at fault.
"""

from __future__ import annotations

import gzip
from pathlib import Path


class DataError(ValueError):
    """A data file is missing, empty or misaligned with its pair."""


def open_text(path: Path) -> list[str]:
    """Lines of a plain or gzip'ed UTF-8 text file (without line ends)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return [line.rstrip("\n").rstrip("\r") for line in f]
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: unreadable ({err})") from None


def open_references(path: Path) -> list[list[str]]:
    """Per line of a plain or gzip'ed text file, its tab-separated references (any number, at least one)."""
    refs = []
    for i, line in enumerate(open_text(path), 1):
        fields = line.split("\t")
        if not line.strip():
            raise DataError(f"{path} line {i}: empty line (every sentence needs at least one reference)")
        if empty := [k for k, field in enumerate(fields, 1) if not field.strip()]:
            raise DataError(f"{path} line {i}: reference {empty[0]} is empty (a stray tab?)")
        refs.append(fields)
    return refs


def find_split(directory: Path, prefix: str, lang: str) -> Path:
    """``{prefix}.{lang}.gz`` or ``{prefix}.{lang}`` in `directory`."""
    for name in (f"{prefix}.{lang}.gz", f"{prefix}.{lang}"):
        if (directory / name).is_file():
            return directory / name
    raise DataError(f"{directory}: no file {prefix}.{lang}.gz or {prefix}.{lang}")


def read_parallel(directory: str | Path, prefix: str, src_lang: str, tgt_lang: str) -> tuple[list[str], list[str]]:
    """The aligned source and target lines of one split; errors name the file and the line counts."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(f"{directory}: data directory not found")
    src_path, tgt_path = find_split(directory, prefix, src_lang), find_split(directory, prefix, tgt_lang)
    src, tgt = open_text(src_path), open_text(tgt_path)
    if not src:
        raise DataError(f"{src_path}: file is empty")
    if len(src) != len(tgt):
        raise DataError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: files are misaligned")
    return src, tgt
