"""docs/language-models-tour.md walks the pages that run with a language model open: one section per such page
(Watch needs no model and is left out), each picture in docs/tour/, each link opens its page with the shipped language
model and every parameter of the link is taken (AppTest, CPU)."""

from __future__ import annotations

import pytest
from support.gallery import ROOT, TOUR, entries, open_entry

from app import registry
from viz_model.modeldir.shipped import SHIPPED_LANGUAGE_MODEL


def language_model_pages() -> set[str]:
    """The URL paths ("" for the default page) of the pages the registry draws with a language model open."""
    return {registry.link_path(page) for page in registry.pages_for(registry.LANGUAGE_MODEL)}


def test_the_tour_shows_each_language_model_page_once_with_the_shipped_model():
    shown = [entry.url_path for entry in entries(TOUR)]
    assert len(shown) == len(set(shown)), "one section per page"
    assert set(shown) <= language_model_pages() | {"watch"}
    assert language_model_pages() - {"watch"} <= set(shown), "every page that runs with a language model"
    for entry in entries(TOUR):
        assert entry.params.get("model") == SHIPPED_LANGUAGE_MODEL, entry.title
        assert entry.image.is_file() and entry.image.parent.name == "tour", entry.image
        assert entry.image.stat().st_size < 160_000, f"{entry.image.name}: compress it (docs/screenshots.py)"
    assert "language-models-tour.md" in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("entry", entries(TOUR), ids=lambda e: e.url_path or "explore")
def test_each_tour_link_opens_its_page_and_every_parameter_is_taken(entry, monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the tour shows the shipped models
    at = open_entry(entry)
    assert not at.error, [e.value for e in at.error]
