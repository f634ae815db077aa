"""Take the gallery's pictures (docs/gallery/*.webp), the README's screenshot (docs/screenshot.png) and the pictures
of other docs pages (`ELSEWHERE`: a tab of a page, e.g. docs/positions/*.webp).

``python docs/screenshots.py`` starts ``streamlit run app`` with the shipped models on a free port, opens every link
of docs/gallery.md and of the tours (docs/language-models-tour.md, docs/encoders-tour.md) in headless Chromium
(/usr/bin/chromium, as the browser tests do) and saves each page's picture where the page shows it; the gallery's first
link also gives docs/screenshot.png.
Takes a few minutes.
``python docs/screenshots.py masks watch`` retakes only those pictures (named by their file: ``schemes why`` for the
Positional encodings page's, ``tour/sinks`` for the language models tour's, ``encoder-tour/sinks`` for the encoders
tour's).
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS.parent / "tests")]  # the app, and the browser tests' server and Chromium

from support.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402
from support.gallery import ENCODER_TOUR, TOUR, entries  # noqa: E402

VIEWPORT = {"width": 1440, "height": 1000}
TALLEST = 2000  # a picture grows down to its first figure's bottom, up to this height
WIDTH = 1200  # pictures are scaled down to this width
LOAD_S = 300


def settle(page, timeout_s: float = LOAD_S) -> None:
    """Wait until Streamlit has finished its run (no status widget for a while) and the figures are drawn."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while quiet < 4:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{page.url} did not finish in {timeout_s:.0f} s")
        busy = page.locator('[data-testid="stStatusWidget"]').count()
        quiet = 0 if busy else quiet + 1
        time.sleep(0.5)
    time.sleep(1.0)  # plotly's last layout pass


def train(page) -> None:
    """The Watch page: press Train and wait for the run (its budget is in the link) to finish drawing."""
    page.get_by_role("button", name="Train", exact=True).click()
    stop = page.locator('[data-testid="stMain"]').get_by_role("button", name="Stop")
    stop.wait_for(state="visible", timeout=60_000)
    stop.wait_for(state="hidden", timeout=LOAD_S * 1000)
    settle(page)


def tab(name: str):
    """An action that opens the page's tab `name` and waits for its figures."""
    def open_tab(page) -> None:
        page.get_by_role("tab", name=name).click()
        settle(page)
    return open_tab


ACTIONS = {"watch": train}
SENTENCE = "A+man+in+a+red+jacket+reads+a+newspaper+on+a+bench."
# pictures of other docs pages: the file, the link (relative to the explorer's address), the tab it shows
ELSEWHERE = [(DOCS / "positions" / "schemes.webp", f"positional?sentence={SENTENCE}&model=mixed-en-de",
              "Today's schemes"),
             (DOCS / "positions" / "why.webp", f"positional?sentence={SENTENCE}&model=mixed-en-de",
              "Why did this head look there")]
OPEN_PANEL = """() => {
  const panel = [...document.querySelectorAll('[role="tabpanel"]')].find((p) => p.getBoundingClientRect().height > 0);
  const box = panel.getBoundingClientRect();
  return {x: box.left, y: box.top, width: box.width, height: box.height};
}"""
FIRST_FIGURE_BOTTOM = """() => {
  const plot = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
  const main = document.querySelector('[data-testid="stMain"]');
  return plot ? plot.getBoundingClientRect().bottom + (main ? main.scrollTop : 0) : 0;
}"""


def picture(page) -> bytes:
    """The page from its top down to the bottom of its first figure (at least the viewport, at most `TALLEST`)."""
    bottom = int(page.evaluate(FIRST_FIGURE_BOTTOM))
    page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], min(bottom + 40, TALLEST))})
    time.sleep(1.0)
    png = page.screenshot()
    page.set_viewport_size(VIEWPORT)
    return png


def panel_picture(page) -> bytes:
    """The open tab's panel, from its top down at most `TALLEST` pixels."""
    page.set_viewport_size({"width": VIEWPORT["width"], "height": 4000})
    time.sleep(1.0)
    box = page.evaluate(OPEN_PANEL)
    png = page.screenshot(clip={**box, "height": min(box["height"], TALLEST)})
    page.set_viewport_size(VIEWPORT)
    return png


def save(png: bytes, path: Path) -> None:
    """A screenshot scaled to `WIDTH`: WebP for the gallery, a 256-colour PNG for the README."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    image = image.resize((WIDTH, round(image.height * WIDTH / image.width)), Image.LANCZOS)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".webp":
        image.save(path, "WEBP", quality=72, method=6)
    else:
        image.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    print(f"{path.relative_to(DOCS.parent)}: {path.stat().st_size / 1024:.0f} KiB")


def main(names: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    gallery = entries()
    tours = entries(TOUR) + entries(ENCODER_TOUR)
    chosen = [e for e in gallery + tours if not names or f"{e.image.parent.name}/{e.image.stem}" in names
              or (e.image.parent.name == "gallery" and e.image.stem in names)]
    with tempfile.TemporaryDirectory() as tmp, streamlit_server(None, Path(tmp) / "streamlit.log") as url, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_context(viewport=VIEWPORT).new_page()
        for entry in chosen:
            page.goto(f"{url}/{entry.link}")
            page.wait_for_selector('[data-testid="stMain"]', timeout=LOAD_S * 1000)
            settle(page)
            ACTIONS.get(entry.image.stem, lambda page: None)(page)
            if page.locator('[data-testid="stException"]').count():
                raise RuntimeError(f"{entry.title}: the page shows an exception")
            png = picture(page)
            save(png, entry.image)
            if entry is gallery[0]:
                save(png, DOCS / "screenshot.png")
        for path, link, name in ELSEWHERE:
            if names and path.stem not in names:
                continue
            page.goto(f"{url}/{link}")
            page.wait_for_selector('[data-testid="stMain"]', timeout=LOAD_S * 1000)
            settle(page)
            tab(name)(page)
            save(panel_picture(page), path)
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
