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


def their_pieces(hf_tok, ids: list[int], byte_level: bool) -> list[str]:
    """transformers' tokens of `ids` as this project labels them: a byte-level token of whole characters as its text,
    a leading space as ``▁`` (a token of part of a character keeps its bytes, ``Ġ`` as ``▁``)."""
    tokens = hf_tok.convert_ids_to_tokens(ids)
    if not byte_level:
        return tokens
    shown = [hf_tok.decode([i]) for i in ids]
    return [t.replace("Ġ", "▁") if "\ufffd" in s else "▁" + s[1:] if s.startswith(" ") else s
            for t, s in zip(tokens, shown)]
