"""A 4,096-token prompt in a real browser (Debian's Chromium, CPU fp32): `streamlit run app` on a tiny imported
Llama with room for 4,608 positions, a generated text of at least 4,096 tokens and one new token (maps made on
demand); every page that runs with a language model open, and each Explore view, settles with no exception box and
no error (a page that draws whole maps says in one line that it opens on shorter prompts), each within
`SETTLE_LIMIT_S` (the aim is 5 s; the machine is shared, so the figures measured are printed
and written to ``long-prompt-settle.json`` beside the screenshots)."""

from __future__ import annotations

import json
import shutil
import time
from urllib.parse import urlencode

import pytest
from support.app import APP
from support.browser import ARTIFACTS, CHROMIUM, FIRST_LOAD_S, shot, streamlit_server
from support.hf_lm import import_lm
from support.long_lm import long_llama_folder, long_text
from test_browser_lm import language_model_pages

from viz_model.modeldir.shipped import DEFAULT_MODEL

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]
TOKENS = 4096
SETTLE_LIMIT_S = 30  # asserted; the aim is 5 s on an idle 2-core machine
QUIET_S = 1.0  # the status widget gone this long: the run is over
SHORTER_ONLY = "This page draws every cell of whole maps"  # what a page that draws whole maps says instead
NO_LOG = "there are no curves or recipe of its own to draw here"  # The training recipe, an imported model
DRAWS_LONG = {"masks", "decoding", "sinks", "ablation"}  # pages that draw a long prompt (masks as blocks and windows)


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    """The server, and a prompt of `TOKENS` to `TOKENS` + 100 tokens of its model."""
    root = tmp_path_factory.mktemp("long-lm-models")
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)  # Compare's translator
    model = import_lm(long_llama_folder(tmp_path_factory.mktemp("hf-lm")), root)
    words = TOKENS // 5
    while len(model.encode(long_text(words))) < TOKENS:
        words += 5
    prompt = long_text(words)
    assert TOKENS <= len(model.encode(prompt)) <= TOKENS + 100
    with streamlit_server(root, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url, prompt


def settled_after(page, started: float) -> float:
    """Seconds from `started` until Streamlit finished running the page (its status widget gone `QUIET_S`)."""
    page.wait_for_selector('[data-testid="stMain"]', timeout=FIRST_LOAD_S * 1000)
    deadline = started + FIRST_LOAD_S
    while time.monotonic() < deadline:
        seen = time.monotonic()
        if not page.locator('[data-testid="stStatusWidget"]').count():
            time.sleep(QUIET_S)
            if not page.locator('[data-testid="stStatusWidget"]').count():
                return seen - started
        time.sleep(0.2)
    pytest.fail(f"{page.url} did not finish running in {FIRST_LOAD_S} s")


def test_every_language_model_page_settles_on_a_4096_token_prompt(long_server, page):
    url, prompt = long_server
    visits = [("explore (trace)", "", {})]  # the first visit traces the prompt: timed apart
    visits += [(key, path, {}) for key, path in language_model_pages().items()]
    visits += [(f"explore {view}", "", {"view": view}) for view in ("model", "head", "focus")]
    timings, problems = {}, {}
    for name, path, extra in visits:
        query = urlencode({"model": "llama", "sentence": prompt, "new_tokens": "1", "beam": "1", **extra})
        started = time.monotonic()
        page.goto(f"{url}/{path}?{query}")
        timings[name] = round(settled_after(page, started), 1)
        shot(page, f"long-prompt-{name.replace(' ', '-')}.png")
        if page.locator('[data-testid="stException"]').count():
            problems[name] = page.locator('[data-testid="stException"]').first.inner_text()[:300]
        elif errors := page.locator('[data-testid="stAlertContentError"]').all_text_contents():
            problems[name] = errors
        elif SHORTER_ONLY in page.locator('[data-testid="stMain"]').inner_text():
            if name in DRAWS_LONG:
                problems[name] = "says it opens on shorter prompts"
            timings[name] = f"{timings[name]} (says it opens on shorter prompts)"
        elif NO_LOG in page.locator('[data-testid="stMain"]').inner_text():
            timings[name] = f"{timings[name]} (an imported model: no training log to draw)"
        elif not page.locator(".js-plotly-plot").count() and name != "watch":
            problems[name] = "no figure drawn"
    (ARTIFACTS / "long-prompt-settle.json").write_text(json.dumps(timings, indent=1))
    print("seconds to settle:", timings)
    assert not problems, problems
    slow = {name: s for name, s in timings.items()
            if float(str(s).split()[0]) > SETTLE_LIMIT_S and name != "explore (trace)"}
    assert not slow, f"pages that took over {SETTLE_LIMIT_S} s on a {TOKENS}-token prompt: {slow}"
