"""The Chromium walk over a long prompt, shared by tests/browser/test_browser_long_prompt.py and
benchmarks/bench_long_views.py: the models folder (a tiny imported Llama with room for 4,608 positions and the shipped
translator), a prompt of a given number of tokens, the visits (every language-model page, each Explore view), and how
long a visit takes to settle."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

from app.views.patching.patching_lm import NO_EVEN_PAIR
from support.app import APP
from support.browser import navigate, settled_after, show_view
from support.hf_lm import import_lm
from support.long_lm import long_llama_folder, long_text
from viz_model.modeldir.shipped import DEFAULT_MODEL

TOKENS = 4096
EXPLORE_VIEWS = ("model", "head", "focus")  # Explore opens on its heatmap; these are its other views
TRACE_VISIT = "explore-trace"  # the first visit traces the prompt: timed apart
NO_LOG = "there are no curves or recipe of its own to draw here"  # The training recipe, an imported model
NOTES = {NO_LOG: "an imported model: no training log to draw",
         NO_EVEN_PAIR: "a toy tokenizer: no shipped prompt pair of one token count to patch"}


def language_model_pages() -> dict[str, str]:
    """Page key -> its URL path ("" for the page the app opens on), for every page the app's registry draws with a
    language model open."""
    from app import registry

    return {page.key: registry.link_path(page) for page in registry.pages_for(registry.LANGUAGE_MODEL)}


def long_models(root: Path, scratch: Path, tokens: int = TOKENS) -> str:
    """Fill `root` with the shipped translator (Compare's) and the tiny long Llama imported as ``llama`` (built in
    `scratch`); return a generated prompt of `tokens` to `tokens` + 100 tokens of its tokenizer."""
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)
    model = import_lm(long_llama_folder(scratch), root)
    words = tokens // 5
    while len(model.encode(long_text(words))) < tokens:
        words += 5
    prompt = long_text(words)
    assert tokens <= len(model.encode(prompt)) <= tokens + 100
    return prompt


def visits(pages: dict[str, str] | None = None, views: tuple[str, ...] = EXPLORE_VIEWS) -> list[tuple[str, str, dict]]:
    """(name, URL path, extra query) of each visit, in order: the tracing visit first, then `pages` (default every
    language-model page), then Explore's `views`."""
    pages = language_model_pages() if pages is None else pages
    return ([(TRACE_VISIT, "", {})] + [(key, path, {}) for key, path in pages.items()]
            + [(f"explore-{view}", "", {"view": view}) for view in views])


def visit(page, url: str, prompt: str, path: str, extra: dict) -> tuple[float, str | None, object]:
    """Open `path` with `prompt` on the long Llama (one new token, greedy); return its seconds to settle, a note (the
    page has no log to draw) and a problem (an exception box, an error, no
    figure where one is due), each None where there is none."""
    query = urlencode({"model": "llama", "sentence": prompt, "new_tokens": "1", "beam": "1", **extra})
    started = time.monotonic()
    page.goto(f"{url}/{path}?{query}")
    return settled_after(page, started), *inspect(page, path)


def walk_visits(page, url: str, prompt: str) -> Iterator[tuple[str, float, str | None, object]]:
    """The visits of `visits()` in one page load: the tracing visit by `visit`, then every language-model page by the
    sidebar's navigation (Explore last, from the page before it), then Explore's views by its view picker; yields
    (name, seconds from the click until drawn, note, problem) of each (`inspect`)."""
    yield TRACE_VISIT, *visit(page, url, prompt, "", {})
    pages = language_model_pages()
    for key, path in [*((k, p) for k, p in pages.items() if p), *((k, p) for k, p in pages.items() if not p)]:
        yield key, navigate(page, path), *inspect(page, path)
    for view in EXPLORE_VIEWS:
        yield f"explore-{view}", show_view(page, view), *inspect(page, "")


def inspect(page, path: str) -> tuple[str | None, object]:
    """The page drawn at `path`: a note (the page has no log to draw) and a problem (an exception box, an error, no
    figure where one is due), each None where there is none."""
    if page.locator('[data-testid="stException"]').count():
        return None, page.locator('[data-testid="stException"]').first.inner_text()[:300]
    if errors := page.locator('[data-testid="stAlertContentError"]').all_text_contents():
        return None, errors
    text = page.locator('[data-testid="stMain"]').inner_text()
    note = next((note for marker, note in NOTES.items() if marker in text), None)
    if note is None and not page.locator(".js-plotly-plot").count() and path != "watch":
        return None, "no figure drawn"
    return note, None
