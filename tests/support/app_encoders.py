"""The app's encoder-only fixtures: a models folder holding a small random BERT and DeBERTa-v3 (built by transformers,
imported with ``viz-model import``; `build_encoder_assets`), and the pages opened with one of them picked."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from support.app import open_page

ENCODERS = ("bert", "deberta-v3")  # WordPiece with token types and learned positions; disentangled attention


def imported_into(root: Path, names: Iterable[str], build: Callable[[Path, str], Path]) -> Path:
    """``root/NAME`` for each of `names`: the Hugging Face folder ``build(root / "hf", NAME)`` imported (skipped where
    already there); returns `root`."""
    from viz_model.hf.importer import import_model

    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (root / name / "config.json").is_file():
            import_model(str(build(root / "hf", name)), root / name)
    shutil.rmtree(root / "hf", ignore_errors=True)
    return root


def build_encoder_assets(root: Path) -> Path:
    """``root/bert`` and ``root/deberta-v3``, each a Hugging Face folder built by transformers and imported (skipped
    where already there); returns `root`."""
    from support.hf_encoders import build_encoder_folder

    return imported_into(root, ENCODERS, build_encoder_folder)


def encoder_page(page: str | None, model: str = "bert", at: AppTest | None = None, **params: str) -> AppTest:
    """Page `page` (a registry key) run with encoder `model` picked (the assets folder set through
    ``VIZ_MODEL_ASSETS``): `open_page` on a fresh session whose link holds `params` (or on `at`)."""
    return open_page(page, at, model=model, **params)
