"""docs/gallery.md shows every page of the explorer once, and each picture's link opens its page: the app reads
every query parameter of the link without a complaint (the app's own link parsing, in AppTest: no browser)."""

from __future__ import annotations

import pytest
from support.gallery import ROOT, app_pages, entries, open_entry

from app import page_settings, state


def test_the_gallery_shows_every_page_once_under_its_title():
    pages = {page.url_path: page for page in app_pages()}
    shown = [entry.url_path for entry in entries()]
    assert sorted(shown) == sorted(pages), "one gallery section per page of app/registry.py"
    for entry in entries():
        assert entry.title == pages[entry.url_path].title
        assert entry.image.is_file() and entry.image.parent.name == "gallery", entry.image
        assert entry.image.stat().st_size < 160_000, f"{entry.image.name}: compress it (docs/screenshots.py)"


def test_every_link_names_only_parameters_the_app_reads():
    """The frame's parameters (`state.URL_KEYS`) and the page's own (its `page_settings` declarations)."""
    own = {page.url_path: set(page_settings.BY_PAGE[page.key].link_names()) for page in app_pages()}
    assert {"step", "tree_beam"} <= own["decoding"] and "task" in own["watch"]  # the declarations name them
    for entry in entries():
        unknown = set(entry.params) - set(state.URL_KEYS) - own[entry.url_path]
        assert not unknown, f"{entry.title}: {unknown}"


def test_the_docs_navigation_and_the_readme_screenshot():
    assert "gallery.md" in (ROOT / "mkdocs.yml").read_text()
    assert "docs/screenshot.png" in (ROOT / "README.md").read_text()
    assert (ROOT / "docs" / "screenshot.png").stat().st_size < 200_000


@pytest.mark.slow
@pytest.mark.parametrize("entry", entries(), ids=lambda e: e.url_path or "explore")
def test_each_link_opens_its_page_and_every_parameter_is_taken(entry, monkeypatch):
    monkeypatch.delenv("VIZ_MODEL_ASSETS", raising=False)  # the gallery shows the shipped models
    at = open_entry(entry)
    page = next(p for p in app_pages() if p.url_path == entry.url_path)
    assert [t.value for t in at.title][:1] == [page.title]
