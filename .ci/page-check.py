"""Open the explorer at URL in Debian's headless Chromium and wait (at most 180 s) for a heatmap; exit 1 if none
comes or the page shows an error. Used by .ci/wheel-check."""

import sys

from playwright.sync_api import sync_playwright

url = sys.argv[1]
flags = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=flags)
    page = browser.new_page()
    for _ in range(60):  # the server may still be starting
        try:
            page.goto(url, timeout=10_000)
            break
        except Exception:
            page.wait_for_timeout(2_000)
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=180_000)
    errors = page.locator("[data-testid='stException'], [data-testid='stAlertContentError']").count()
    title = page.title()
    browser.close()
if errors:
    sys.exit(f"the page shows {errors} error box(es)")
print(f"heatmap drawn at {url} ({title})")
