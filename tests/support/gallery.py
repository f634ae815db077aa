"""docs/gallery.md and the tours (docs/language-models-tour.md, docs/encoders-tour.md) read as data: each section's
page title, picture and link (shared by their tests and by docs/screenshots.py, which takes the pictures by opening the
links)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "docs" / "gallery.md"
TOUR = ROOT / "docs" / "language-models-tour.md"  # the same form, with the shipped language model
ENCODER_TOUR = ROOT / "docs" / "encoders-tour.md"  # and with the shipped encoder
BASE = "http://localhost:8501/"


class Entry(NamedTuple):
    title: str
    image: Path
    link: str  # relative to BASE: "masks?sentence=..."

    @property
    def url_path(self) -> str:
        return urlsplit(self.link).path

    @property
    def params(self) -> dict[str, str]:
        """The link's query parameters (each named once)."""
        values = parse_qs(urlsplit(self.link).query, keep_blank_values=True, strict_parsing=True)
        repeated = [name for name, found in values.items() if len(found) != 1]
        if repeated:
            raise ValueError(f"{self.title}: {', '.join(repeated)} named more than once")
        return {name: found[0] for name, found in values.items()}


def entries(path: Path = GALLERY) -> list[Entry]:
    """The gallery's sections, in order; `ValueError` for a section without a picture or a link to `BASE`."""
    found = []
    for section in re.split(r"^## ", path.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title = section.splitlines()[0].strip()
        image = re.search(r"!\[[^\]]*\]\(([^)]+)\)", section)
        link = re.search(r"\[Open this view\]\(([^)]+)\)", section)
        if image is None or link is None or not link.group(1).startswith(BASE):
            raise ValueError(f"gallery section {title!r}: a picture and a link to {BASE} expected")
        found.append(Entry(title, path.parent / image.group(1), link.group(1).removeprefix(BASE)))
    return found


class AppPage(NamedTuple):
    key: str  # "masks"
    title: str
    url_path: str  # "" for the default page


def app_pages() -> list[AppPage]:
    """The explorer's pages as its registry (app/registry.py) lists them, titled as with a translator open (the
    gallery's models); the default page's URL path is ""."""
    from app import registry

    return [AppPage(page.key, page.title_for(registry.TRANSLATOR), registry.link_path(page))
            for page in registry.PAGES]


LINK_PROBLEM = "Some link parameters could not be used"


def open_entry(entry: Entry):
    """Run the app on `entry`'s link as a browser would (AppTest), on its page; check that every parameter of the
    link was taken (no link warning, each written back as given) and return the finished AppTest."""
    from support.app import open_page

    page = next(p for p in app_pages() if p.url_path == entry.url_path)
    at = open_page(page.key if page.url_path else None, straight=True, timeout=300, **entry.params)
    assert not [w.value for w in at.warning if LINK_PROBLEM in w.value]
    for name, value in entry.params.items():  # the app writes back what it took
        assert at.query_params[name] == value, (name, at.query_params[name], value)
    return at
