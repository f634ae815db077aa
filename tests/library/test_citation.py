"""CITATION.cff: valid Citation File Format 1.2.0 keys, naming the version the package reports."""

from __future__ import annotations

import datetime
from pathlib import Path

import yaml

import viz_model

CITATION = Path(__file__).resolve().parents[2] / "CITATION.cff"


def test_citation_has_the_required_keys_and_the_package_version() -> None:
    data = yaml.safe_load(CITATION.read_text(encoding="utf-8"))
    assert data["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "version", "date-released", "license"):
        assert data.get(key), f"CITATION.cff has no {key}"
    assert all(author.get("name") or author.get("family-names") for author in data["authors"])
    assert data["license"] == "MIT"
    assert str(data["version"]) == viz_model.__version__
    assert isinstance(datetime.date.fromisoformat(str(data["date-released"])), datetime.date)
