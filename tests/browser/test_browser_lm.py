"""Language models in a real browser (Debian's Chromium, CPU fp32): `streamlit run app` on a models folder holding
an imported tiny Llama, a GPT-2, a gpt-oss, a Pythia-style checkpoint series (a tiny GPT-NeoX saved at several steps),
the shipped translator and any language model the assets ship; Complete & explore draws its heatmap with the prompt's
end marked, every page that runs with a language model open is walked with each of them (no exception box, no
"something went wrong", no clipped figure; the series at two steps of its slider, and Watch attention form's series
mode), another page says in one line that it is for translation models."""

from __future__ import annotations

import shutil
from urllib.parse import urlencode

import pytest
from support.app import APP
from support.browser import (
    CHROMIUM,
    FIRST_LOAD_S,
    STEP_S,
    main_text,
    navigate,
    settle,
    shot,
    shot_on_failure,
    streamlit_server,
    tick_labels,
    walk,
)
from support.hf_lm import lm_models_folder
from support.long_walk import language_model_pages
from support.neox_run import STEPS, imported_series, neox_run  # noqa: F401 (a fixture)
from test_browser_walk import CLIPPED

from app import widgets
from app.sessions import LANGUAGE_MODEL, model_languages
from app.views.patching.patching_lm import NO_EVEN_PAIR
from viz_model.modeldir.shipped import DEFAULT_MODEL

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]
FIXTURES = ("llama", "gpt2", "gpt_oss")  # gpt-oss: learned sinks and experts on every page
SERIES = "pythia-series"  # a tiny GPT-NeoX saved at several steps, opened as a checkpoint series
ASSETS = APP.parents[1] / "assets"


def shipped_language_models() -> list[str]:
    """The language models the repository's assets folder ships (none before one is trained)."""
    return sorted(d.name for d in ASSETS.iterdir() if d.is_dir() and model_languages(d) == LANGUAGE_MODEL)


@pytest.fixture(scope="module")
def lm_server(tmp_path_factory, neox_run):  # noqa: F811 (the fixture)
    root = lm_models_folder(tmp_path_factory, FIXTURES)
    imported_series(neox_run, root / SERIES)
    for name in [DEFAULT_MODEL, *shipped_language_models()]:
        shutil.copytree(ASSETS / name, root / name)
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

    page.goto(f"{lm_server}/alignment?model=llama")  # word alignment reads cross-attention: one line, then rollout
    page.get_by_text("Word alignment reads cross-attention").wait_for(timeout=FIRST_LOAD_S * 1000)


@pytest.mark.slow
@pytest.mark.parametrize("model", [*FIXTURES, *shipped_language_models()])
def test_every_language_model_page_in_a_real_browser(lm_server, page, model):
    """Each page the registry draws for a language model, and each Explore view, opened with `model` (one page load:
    the views by the view picker, the pages by the sidebar's navigation): no exception box, no unexpected error, no
    figure with labels outside it; a screenshot of a visit that fails its checks as ``lm-walk-MODEL-PAGE.png``."""
    pages = language_model_pages()
    assert {"explore", "masks", "decoding", "compare"} <= set(pages)
    query = urlencode({"model": model, "sentence": "Two dogs play in the snow.", "new_tokens": "6", "beam": "1"})
    for key, name in walk(page, f"{lm_server}/?{query}", pages, ("model", "head", "focus")):
        check_visit(page, model, key, name)


def check_visit(page, model: str, key: str, name: str) -> None:
    """The page drawn with `model`: no exception box, no unexpected error, a figure where one is due, none with labels
    outside it or squeezed; where a check fails, a screenshot as ``lm-walk-MODEL-NAME.png``."""
    with shot_on_failure(page, f"lm-walk-{model}-{name}.png"):
        assert page.locator('[data-testid="stException"]').count() == 0, f"{model} {name}: an exception box"
        errors = page.locator('[data-testid="stAlertContentError"]').all_text_contents()
        assert not errors, f"{model} {name}: {errors}"
        assert "is for translation models for now" not in main_text(page), name
        figures = page.evaluate(CLIPPED)
        if key == "training" and model in (*FIXTURES, SERIES):  # imported: no training log, one line says so
            assert "there are no curves or recipe of its own to draw here" in main_text(page), name
        elif key == "patching" and NO_EVEN_PAIR in main_text(page):  # a toy tokenizer splits every pair unevenly
            assert model in (*FIXTURES, SERIES), f"{model}: no shipped prompt pair splits evenly"
        else:
            assert figures or key == "watch", f"{model} {name}: no figure drawn"
        clipped = [f for f in figures if f["clipped"]]
        assert not clipped, f"{model} {name}: tick labels outside their figure: {clipped}"
        narrow = [f["title"] for f in figures if 0 < f["width"] < 200]
        assert not narrow, f"{model} {name}: figures squeezed under 200 px: {narrow}"
        assert widgets.UNEXPECTED not in main_text(page), name


@pytest.mark.slow
def test_every_page_with_a_checkpoint_series_at_two_steps(lm_server, page):
    """A Pythia-style series (a GPT-NeoX saved at several steps) opened from the picker: each page the registry draws
    for a language model at the last step (the slider's start), then, the slider moved to the first step in the
    sidebar, each page again at that step (the step kept from page to page), as the walk above checks them; and
    Watch attention form's series mode draws its curves."""
    sidebar = page.locator("section[data-testid='stSidebar']")
    pages = language_model_pages()
    query = urlencode({"model": SERIES, "sentence": "Two dogs play in the snow.", "new_tokens": "6", "beam": "1"})
    for key, name in walk(page, f"{lm_server}/?{query}", pages):
        assert f"Step {STEPS[-1]} of {STEPS[-1]}" in sidebar.inner_text(), key
        check_visit(page, SERIES, key, f"{name}-step{STEPS[-1]}")
    *others, last = pages
    sidebar.locator('[data-testid="stSlider"]').filter(has_text="Training step").get_by_role("slider").press("Home")
    sidebar.get_by_text(f"Step {STEPS[0]} of {STEPS[-1]}").wait_for(timeout=STEP_S * 1000)
    settle(page)
    for key in [last, *others]:
        if key != last:
            navigate(page, pages[key])
        assert f"Step {STEPS[0]} of {STEPS[-1]}" in sidebar.inner_text(), key
        check_visit(page, SERIES, key, f"{key}-step{STEPS[0]}")
    page.goto(f"{lm_server}/{pages['watch']}?{urlencode({'model': SERIES, 'experiment': 'series'})}")
    settle(page)
    check_visit(page, SERIES, "watch", "watch-series")
    assert len(page.evaluate(CLIPPED)) == 2, "the series' curves and its heads per step"
