"""docs/gallery.md and docs/language-models-tour.md read as data: each section's page title, picture and link (shared
by their tests and by docs/screenshots.py, which takes the pictures by opening the links)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "docs" / "gallery.md"
TOUR = ROOT / "docs" / "language-models-tour.md"  # the same form, with the shipped language model
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
    file: str  # "views/masks.py"
    title: str
    url_path: str  # "" for the default page


def app_pages() -> list[AppPage]:
    """The explorer's pages as app/streamlit_app.py declares them (its ``st.Page(...)`` calls), read without running
    it; the default page's URL path is ""."""
    tree = ast.parse((ROOT / "app" / "streamlit_app.py").read_text(encoding="utf-8"))
    pages = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Page" and node.args:
            keywords = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            if keywords.get("title") == "No model found":
                continue
            pages.append(AppPage(node.args[0].value, keywords["title"], keywords.get("url_path", "")))
    return pages


LINK_PROBLEM = "Some link parameters could not be used"


def open_entry(entry: Entry):
    """Run the app on `entry`'s link as a browser would (AppTest), on its page; check that every parameter of the
    link was taken (no link warning, each written back as given) and return the finished AppTest."""
    from streamlit.testing.v1 import AppTest

    from support.app import APP, ok

    page = next(p for p in app_pages() if p.url_path == entry.url_path)
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.query_params.update(entry.params)
    if page.url_path:
        if Path(page.file).stem != page.url_path:  # until its first run AppTest finds pages by their file name
            at.run()
        at.switch_page(page.file)
    ok(at.run())
    assert not [w.value for w in at.warning if LINK_PROBLEM in w.value]
    for name, value in entry.params.items():  # the app writes back what it took
        assert at.query_params[name] == value, (name, at.query_params[name], value)
    return at
