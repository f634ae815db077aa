"""End to end in a real browser: `streamlit run app` on a free loopback port, driven with Debian's Chromium.

Playwright's Python package drives /usr/bin/chromium (never a downloaded browser). The server uses a tiny random
model (VIZ_MODEL_ASSETS). Screenshots land in test-artifacts/. No JavaScript dialog may ever open.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest
from support.app import INJECTION, ROOT, TINY_CONFIG  # noqa: E402
from support.browser import (
    CHROMIUM,
    FIRST_LOAD_S,
    STEP_S,
    hover_text,
    pick,
    plot_area,
    settle,
    shot,
    streamlit_server,
    switch_view,
    tick_labels,
    wait_title,
    wait_url,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]


# --- tests -------------------------------------------------------------------------------------------------------
def test_explore_in_a_real_browser(server, page):
    started = time.monotonic()
    page.goto(f"{server}/?beam=1")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    print(f"\nfirst page load to heatmap: {time.monotonic() - started:.1f} s")

    # type a sentence, press Translate, wait for its heatmap
    page.get_by_label("Sentence to translate (English)").fill("A woman reads a book on the beach.")
    started = time.monotonic()
    page.get_by_role("button", name="Translate").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot .xtick text')].some(e => e.textContent === '▁beach')",
        timeout=STEP_S * 1000)
    print(f"translate to heatmap: {time.monotonic() - started:.2f} s")
    wait_url(page, "sentence=A woman reads a book on the beach.")
    keys, queries = tick_labels(page, "x"), tick_labels(page, "y")
    assert keys == queries and keys[-1] == "</s>"

    # hover a cell: the tooltip names the query, the key and the exact weight the figure holds
    box = plot_area(page)
    i, j = 2, 1
    page.mouse.move(box["x"] + (j + 0.5) / len(keys) * box["width"],
                    box["y"] + (i + 0.5) / len(queries) * box["height"])
    tooltip = hover_text(page)
    assert f"query {i}: {queries[i]}" in tooltip and f"key {j}: {keys[j]}" in tooltip
    weight = float(re.search(r"weight ([0-9.]+)", tooltip).group(1))
    stored = page.evaluate("([i, j]) => document.querySelector('.js-plotly-plot').calcdata[0][0].z[i][j]", [i, j])
    assert abs(weight - stored) < 1e-6
    shot(page, "explore-heatmap.png")

    # export this map: PNG through Plotly's image export (kaleido renders with Chromium on the server)
    page.get_by_role("button", name="Export").click()
    page.get_by_role("button", name="Render PNG and SVG").click()
    with page.expect_download(timeout=STEP_S * 1000) as download:
        page.get_by_role("button", name="PNG image").click(timeout=STEP_S * 1000)
    assert Path(download.value.path()).read_bytes().startswith(b"\x89PNG")
    page.keyboard.press("Escape")

    # the copy-link box holds a full URL that reproduces the view
    page.get_by_role("button", name="Copy link").click()
    link = page.locator('[data-testid="stCode"] code').first.text_content()
    assert link.startswith(f"{server}/?sentence=A+woman+reads") and "view=heatmap" in link
    page.keyboard.press("Escape")

    # switch the head
    pick(page, "Head", f"Head 2 of {TINY_CONFIG['heads']}")
    wait_title(page, "Encoder self-attention: layer 1, head 2")
    wait_url(page, "head=2")

    # model view: every layer x head; a click opens that map in the heatmap
    switch_view(page, "Model view", f"all {TINY_CONFIG['encoder_layers']} layers × {TINY_CONFIG['heads']} heads")
    shot(page, "model-view.png")
    box = plot_area(page)
    page.mouse.click(box["x"] + box["width"] * 2.5 / TINY_CONFIG["heads"],
                     box["y"] + box["height"] * 1.5 / TINY_CONFIG["encoder_layers"])
    wait_title(page, "Encoder self-attention: layer 2, head 3")

    # head view: clicking a token keeps only its lines
    switch_view(page, "Head view", "layer 2, heads")
    plot_area(page)
    page.locator(".js-plotly-plot .scatterlayer .trace").last.locator(".point").first.click(force=True)
    wait_title(page, "only the lines of key 0")
    shot(page, "head-view.png")

    switch_view(page, "Token focus", "token 1:")

    # the trace downloads (deferred JSON)
    page.get_by_role("button", name="Download trace").click()
    with page.expect_download(timeout=STEP_S * 1000) as download:
        page.get_by_role("button", name="Trace as JSON").click()
    data = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
    assert data["source_text"] == "A woman reads a book on the beach."
    page.keyboard.press("Escape")

    # the decoding steps, folded: no data grid until the expander is opened (which reruns the page)
    assert page.locator('[data-testid="stDataFrame"]').count() == 0
    page.get_by_text("Decoding steps: what the model chose").click()
    page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=STEP_S * 1000)

    # the other pages
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Masks").click()
    wait_title(page, "Padding mask of the keys")
    wait_title(page, "of the batch")
    shot(page, "masks.png")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Positional encoding").click()
    wait_title(page, "PE matrix")
    wait_title(page, "Numerical error of M_k")
    shot(page, "positional.png")
    # the other teaching pages (Learn)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Attention by hand").click()
    wait_title(page, "Weights with ÷ √3")
    shot(page, "attention-by-hand.png")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Decoding step by step").click()
    wait_title(page, "Beam search tree")
    shot(page, "decoding.png")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="The training recipe").click()
    wait_title(page, "The loaded model, with the tensor shapes")
    shot(page, "training.png")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Translate & explore").click()
    page.wait_for_selector(".js-plotly-plot", timeout=STEP_S * 1000)


ANALYZE_PAGES = {  # nav link -> a figure title each page draws
    "Attribution": "Where each output token's prediction comes from (ALTI+)",
    "Head roles": "entropy of every head",
    "Ablation": "Heads switched off",
    "Alignment & rollout": "Rollout through layers",
    "Compare": "Encoder self-attention: layer 1, mean over heads",
}


def test_analyze_pages_in_a_real_browser(server, page):
    page.goto(f"{server}/?beam=1")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    for link, title in ANALYZE_PAGES.items():
        page.locator('[data-testid="stSidebarNav"] a').filter(has_text=link).click()
        wait_title(page, title)
        shot(page, f"analyze-{link.split()[0].lower()}.png")
    # a click on the ablation grid switches a head off (the grid is redrawn with that head ringed)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Ablation").click()
    wait_title(page, "Heads switched off: 1 of")
    plot_area(page)
    page.locator(".js-plotly-plot").first.locator(".scatterlayer .trace").first.locator(".point").first.click(
        force=True)
    wait_title(page, "Heads switched off: 2 of")


def test_injected_markup_stays_text(server, page):
    page.goto(f"{server}/?" + urlencode({"sentence": INJECTION, "target": INJECTION, "beam": "1"}))
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    # the (forced) translation is shown as the literal text
    page.get_by_test_id("stMarkdownContainer").filter(has_text=INJECTION).first.wait_for(timeout=STEP_S * 1000)
    keys, queries = tick_labels(page, "x"), tick_labels(page, "y")
    assert "<" in keys and ">" in keys  # the pieces of the markup, shown as text
    assert page.locator('img[src="x"]').count() == 0
    assert not page.evaluate("() => [...document.scripts].some(s => s.textContent.includes('alert('))")
    j = keys.index("<")
    box = plot_area(page)
    page.mouse.move(box["x"] + (j + 0.5) / len(keys) * box["width"], box["y"] + 0.5 / len(queries) * box["height"])
    assert f"key {j}: <" in hover_text(page)  # entities are displayed as the characters, not markup, not "&lt;"
    # typed into the box, too
    page.get_by_label("Sentence to translate (English)").fill(INJECTION + " again")
    page.get_by_role("button", name="Translate").click()
    wait_url(page, "again")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=STEP_S * 1000)
    settle(page)
    shot(page, "injection.png")


@pytest.mark.skipif(os.environ.get("VIZ_README_SCREENSHOT") != "1" or not (ROOT / "assets" / "multi30k-en-de").is_dir(),
                    reason="refreshes docs/screenshot.png with the shipped model: set VIZ_README_SCREENSHOT=1")
def test_readme_screenshot(browser, tmp_path):
    """`VIZ_README_SCREENSHOT=1 pytest tests/browser/test_browser.py -k readme` retakes the README's screenshot."""
    params = {"sentence": "Two young dogs are playing in the snow.", "kind": "cross", "layer": "3", "head": "mean"}
    with streamlit_server(None, tmp_path / "streamlit.log") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/?{urlencode(params)}")
        page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
        height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
        page.set_viewport_size({"width": 1400, "height": min(int(height), 1600)})
        keys, queries = tick_labels(page, "x"), tick_labels(page, "y")
        box = plot_area(page)
        i, j = min(2, len(queries) - 1), min(2, len(keys) - 1)
        page.mouse.move(box["x"] + (j + 0.5) / len(keys) * box["width"],
                        box["y"] + (i + 0.5) / len(queries) * box["height"])
        hover_text(page)
        (ROOT / "docs").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / "docs" / "screenshot.png"))
        page.close()
