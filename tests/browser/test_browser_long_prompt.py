"""A 4,096-token prompt in a real browser (Debian's Chromium, CPU fp32): `streamlit run app` on a tiny imported
Llama with room for 4,608 positions, a generated text of at least 4,096 tokens and one new token (maps made on
demand); every page that runs with a language model open, and each Explore view, reached in one page load by the
sidebar's navigation and the view picker, settles with no exception box, no error and a figure drawn (no page refuses
a long prompt), each within
`SETTLE_LIMIT_S` (the aim is 5 s; the machine is shared, so the figures measured are printed
and written to ``long-prompt-settle.json`` in test-artifacts/, with a screenshot of any page that fails)."""

from __future__ import annotations

import json

import pytest
from support.browser import ARTIFACTS, CHROMIUM, shot, streamlit_server
from support.long_walk import TOKENS, TRACE_VISIT, long_models, walk_visits

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]
SETTLE_LIMIT_S = 30  # asserted; the aim is 5 s on an idle 2-core machine (benchmarks/bench_long_views.py)


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    """The server, and a prompt of `TOKENS` to `TOKENS` + 100 tokens of its model."""
    root = tmp_path_factory.mktemp("long-lm-models")
    prompt = long_models(root, tmp_path_factory.mktemp("hf-lm"))
    with streamlit_server(root, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url, prompt


def test_every_language_model_page_settles_on_a_4096_token_prompt(long_server, page):
    url, prompt = long_server
    timings, problems = {}, {}
    for name, seconds, note, problem in walk_visits(page, url, prompt):
        timings[name] = round(seconds, 1) if note is None else f"{seconds:.1f} ({note})"
        if problem is not None:
            shot(page, f"long-prompt-{name.replace(' ', '-')}.png")
            problems[name] = problem
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "long-prompt-settle.json").write_text(json.dumps(timings, indent=1))
    print("seconds to settle:", timings)
    assert not problems, problems
    slow = {name: s for name, s in timings.items()
            if float(str(s).split()[0]) > SETTLE_LIMIT_S and name != TRACE_VISIT}
    assert not slow, f"pages that took over {SETTLE_LIMIT_S} s on a {TOKENS}-token prompt: {slow}"
