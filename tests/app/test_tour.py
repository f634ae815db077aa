"""The tours walk the pages that run with one kind of model open, one section per such page (Watch needs no model and
is left out): docs/language-models-tour.md with the shipped language model, docs/encoders-tour.md with the shipped
encoder. Each picture is in the tour's own folder, each link opens its page with the tour's model and every parameter
of the link is taken (AppTest, CPU)."""

from __future__ import annotations

import pytest
from support.gallery import ENCODER_TOUR, ROOT, TOUR, entries, open_entry

from app import registry
from viz_model.modeldir.shipped import SHIPPED_ENCODER, SHIPPED_LANGUAGE_MODEL

TOURS = {TOUR: (registry.LANGUAGE_MODEL, SHIPPED_LANGUAGE_MODEL, "tour"),
         ENCODER_TOUR: (registry.ENCODER, SHIPPED_ENCODER, "encoder-tour")}


def kind_pages(kind: str) -> set[str]:
    """The URL paths ("" for the default page) of the pages the registry draws with a model of `kind` open."""
    return {registry.link_path(page) for page in registry.pages_for(kind)}


@pytest.mark.parametrize("tour", list(TOURS), ids=lambda path: path.stem)
def test_a_tour_shows_each_page_of_its_kind_once_with_the_shipped_model(tour):
    kind, model, folder = TOURS[tour]
    shown = [entry.url_path for entry in entries(tour)]
    assert len(shown) == len(set(shown)), "one section per page"
    assert set(shown) <= kind_pages(kind) | {"watch"}
    assert kind_pages(kind) - {"watch"} <= set(shown), "every page that runs with this kind of model"
    for entry in entries(tour):
        assert entry.params.get("model") == model, entry.title
        assert entry.image.is_file() and entry.image.parent.name == folder, entry.image
        assert entry.image.stat().st_size < 160_000, f"{entry.image.name}: compress it (docs/screenshots.py)"
    assert tour.name in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("entry", entries(TOUR) + entries(ENCODER_TOUR),
                         ids=lambda e: f"{e.image.parent.name}-{e.url_path or 'explore'}")
def test_each_tour_link_opens_its_page_and_every_parameter_is_taken(entry, monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the tours show the shipped models
    at = open_entry(entry)
    assert not at.error, [e.value for e in at.error]
