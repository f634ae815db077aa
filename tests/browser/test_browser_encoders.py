"""Encoder-only models in a real browser (Debian's Chromium, CPU fp32): `streamlit run app` on a models folder holding
a small random BERT and DeBERTa-v3 (imported) and on the shipped models (the shipped encoder; the shipped language
model for Compare); every page of the registry is walked with each of them, with a mask
token in the text and with a sentence pair: no exception box, no error, no "something went wrong", no clipped
figure; a page drawn for an encoder draws a figure, one that is not says so in one line."""

from __future__ import annotations

import os
from itertools import chain
from urllib.parse import urlencode

import pytest
from support.app_encoders import ENCODERS
from support.browser import CHROMIUM, main_text, open_each, shot_on_failure, streamlit_server, walk
from test_browser_walk import CLIPPED

from app import registry, widgets
from viz_model.modeldir.shipped import ASSETS_DIR, SHIPPED_ENCODER

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                     "(apt-get install chromium); CI installs it"),
]


@pytest.fixture(scope="module")
def encoder_server(encoder_assets, tmp_path_factory):
    folders = os.pathsep.join([str(encoder_assets), str(ASSETS_DIR)])  # the fixtures, then the shipped models
    with streamlit_server(folders, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


@pytest.mark.parametrize("model", [*ENCODERS, SHIPPED_ENCODER])
def test_every_page_opens_with_an_encoder_in_a_real_browser(encoder_server, page, model):
    """Each page of the registry, and each Explore view, opened with `model` in one page load (the views by the view
    picker, the pages by the sidebar's navigation), then the head view of a pair and the masks of a pair (a page load
    each: a page reads its own settings from the link on its first run only); a screenshot of a visit that
    fails its checks as ``encoder-walk-MODEL-PAGE.png``."""
    query = {"model": model, "sentence": "Two young dogs are [MASK] in the snow."}
    pair = {"pair": "The old dog reads a book."}
    linked = [(f"{encoder_server}/?{urlencode({**query, 'view': 'head', **pair})}", "explore", "explore-head-The"),
              (f"{encoder_server}/{registry.BY_KEY['masks'].url_path}?{urlencode({**query, **pair})}", "masks",
               "masks-The")]
    walked = walk(page, f"{encoder_server}/?{urlencode(query)}", {p.key: registry.link_path(p) for p in registry.PAGES},
                  ("model", "head", "focus"))
    for key, name in chain(walked, open_each(page, linked)):
        with shot_on_failure(page, f"encoder-walk-{model}-{name}.png"):
            assert page.locator('[data-testid="stException"]').count() == 0, f"{model} {name}: an exception box"
            errors = page.locator('[data-testid="stAlertContentError"]').all_text_contents()
            assert not errors, f"{model} {name}: {errors}"
            assert widgets.UNEXPECTED not in main_text(page), name
            figures = page.evaluate(CLIPPED)
            drawn = registry.script(key, registry.ENCODER)
            if drawn is None:
                assert registry.BY_KEY[key].draws[registry.ENCODER].reason in main_text(page), name
            elif key == "training" and model in ENCODERS:  # imported: no training log, one line says so
                assert "there are no curves or recipe of its own to draw here" in main_text(page), name
            elif key != "watch":
                assert figures, f"{model} {name}: no figure drawn"
            clipped = [f for f in figures if f["clipped"]]
            assert not clipped, f"{model} {name}: tick labels outside their figure: {clipped}"
            narrow = [f["title"] for f in figures if 0 < f["width"] < 200]
            assert not narrow, f"{model} {name}: figures squeezed under 200 px: {narrow}"
