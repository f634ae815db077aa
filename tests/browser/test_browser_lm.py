"""A language model in a real browser (Debian's Chromium, CPU fp32): `streamlit run app` on a models folder holding
an imported tiny Llama; Complete & explore draws its heatmap with the prompt's end marked, another page says in one
line that it is for translation models."""

from __future__ import annotations

import pytest
from support.browser import CHROMIUM, FIRST_LOAD_S, STEP_S, shot, streamlit_server, tick_labels
from support.hf_lm import build_lm_folder, import_lm

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]


@pytest.fixture(scope="module")
def lm_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser-lm-models")
    import_lm(build_lm_folder(tmp_path_factory.mktemp("hf-lm"), "llama"), root)
    with streamlit_server(root, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def test_complete_and_explore_in_a_real_browser(lm_server, page):
    page.goto(f"{lm_server}/?model=llama&sentence=a%20man%20plays&new_tokens=4")
    page.wait_for_selector(".js-plotly-plot .heatmaplayer", timeout=FIRST_LOAD_S * 1000)
    assert page.get_by_text("Complete & explore").first.is_visible()
    keys = tick_labels(page, "x")
    assert len(keys) == len(tick_labels(page, "y")) > 4
    page.wait_for_selector(".js-plotly-plot .shapelayer path", state="attached", timeout=STEP_S * 1000)
    assert page.locator(".js-plotly-plot .shapelayer path").count() == 2  # the prompt's end, on both axes
    assert "Language model · CPU" in page.locator("section[data-testid='stSidebar']").inner_text()
    shot(page, "lm-complete-and-explore.png")

    page.goto(f"{lm_server}/masks?model=llama")
    page.get_by_text("Masks is for translation models for now").wait_for(timeout=FIRST_LOAD_S * 1000)
    assert page.locator(".js-plotly-plot").count() == 0
