"""Every page in headless Chromium with a sentence of its own: no exception box, no "something went wrong", no
figure whose tick labels fall outside the figure (clipped) and none whose legend covers its data. Screenshots of the
pages a test looks at, and of any page that fails its checks, land in test-artifacts/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from support.browser import CHROMIUM, FIRST_LOAD_S, settle, shot, shot_on_failure, streamlit_server, walk

from app import widgets  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
]
# on the suite's workers (tests/support/parallel.py), each server's tests a group of their own: minutes each
SPLIT_BY_FIXTURES = ("server", "imported_server", "schemes_server", "families_server")

SENTENCE = "My grandmother bakes bread every Sunday morning."
PAGES = ["", "masks", "positional", "attention-by-hand", "decoding", "training", "attribution", "head-roles",
         "ablation", "alignment", "compare"]

# Per figure: its size, every tick label whose box leaves the figure's own SVG, whether its legend box lies over
# a plot area (where it would hide bars, cells or lines), and the texts written in its cells or as annotations whose
# boxes overlap (words that run together).
CLIPPED = """() => [...document.querySelectorAll('.js-plotly-plot')].map((plot, index) => {
  const svg = plot.querySelector('svg.main-svg');
  if (!svg) return {index, title: '', width: 0, clipped: []};
  const frame = svg.getBoundingClientRect();
  const title = plot.querySelector('.gtitle')?.textContent || '';
  const clipped = [...plot.querySelectorAll('.xtick text, .ytick text')].filter((e) => {
    const b = e.getBoundingClientRect();
    return e.textContent.trim() && b.width > 0 && (b.left < frame.left - 1 || b.right > frame.right + 1
      || b.top < frame.top - 1 || b.bottom > frame.bottom + 1);
  }).map((e) => e.textContent);
  const legend = plot.querySelector('g.legend')?.getBoundingClientRect();
  const covers = legend && legend.width > 0 ? [...plot.querySelectorAll('.nsewdrag')].some((area) => {
    const a = area.getBoundingClientRect();
    return legend.left < a.right - 1 && legend.right > a.left + 1 && legend.top < a.bottom - 1
      && legend.bottom > a.top + 1;
  }) : false;
  const boxes = [...plot.querySelectorAll('.heatmaplayer text, .annotation-text')]
    .filter((e) => e.textContent.trim()).map((e) => [e.textContent, e.getBoundingClientRect()])
    .filter(([, b]) => b.width > 0);
  const overlapping = [];
  boxes.forEach(([text, b], i) => boxes.slice(i + 1).forEach(([other, c]) => {
    if (b.left < c.right - 1 && b.right > c.left + 1 && b.top < c.bottom - 1 && b.bottom > c.top + 1)
      overlapping.push(`${text} / ${other}`);
  }));
  return {index, title, width: frame.width, clipped, covers, overlapping: overlapping.slice(0, 5)};
})"""


def walk_every_page(server: str, page, sentence: str, shots: str, params: dict | None = None) -> None:
    """Open every page with `sentence` (and `params` in the link; one page load, the pages after the first by the
    sidebar's navigation): no exception or "something went wrong", figures drawn, none clipped or squeezed; a
    screenshot of a page that fails its checks as ``{shots}-PAGE.png``."""
    query = urlencode({"sentence": sentence, "beam": "1", **(params or {})})
    for name, _ in walk(page, f"{server}/?{query}", {path or "explore": path for path in PAGES}):
        with shot_on_failure(page, f"{shots}-{name}.png"):
            assert page.locator('[data-testid="stException"]').count() == 0, f"{name}: an exception box"
            errors = page.locator('[data-testid="stAlertContentError"]').all_text_contents()
            assert not [e for e in errors if widgets.UNEXPECTED in e], f"{name}: {errors}"
            figures = page.evaluate(CLIPPED)
            assert figures, f"{name}: no figure drawn"
            clipped = [f for f in figures if f["clipped"]]
            assert not clipped, f"{name}: tick labels outside their figure: {clipped}"
            covered = [f["title"] for f in figures if f["covers"]]
            assert not covered, f"{name}: a legend over the data of {covered}"
            overlapping = {f["title"]: f["overlapping"] for f in figures if f.get("overlapping")}
            assert not overlapping, f"{name}: texts that run together: {overlapping}"
            narrow = [f["title"] for f in figures if 0 < f["width"] < 200]
            assert not narrow, f"{name}: figures squeezed under 200 px: {narrow}"


@pytest.mark.slow
def test_every_page_with_a_sentence_of_its_own(server, page):
    walk_every_page(server, page, SENTENCE, "walk")


LONG_NAME = "opus-mt-tiny-imported-marian-en-de"  # longer than the sidebar's picker shows


@pytest.fixture(scope="module")
def imported_server(tmp_path_factory):
    """A server whose only model is a tiny random Marian model imported from a Hugging Face folder."""
    pytest.importorskip("transformers")
    from support.hf import build_marian_folder

    from viz_model.cli.main import main

    assets = tmp_path_factory.mktemp("imported-assets")
    assert main(["import", str(build_marian_folder(tmp_path_factory.mktemp("hf"))), "--out",
                 str(assets / LONG_NAME)]) == 0
    with streamlit_server(assets, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


@pytest.mark.slow
def test_every_page_with_an_imported_marian_model(imported_server, page):
    """Issue 21: an imported Hugging Face model works on every page in a real browser, not only in AppTest."""
    walk_every_page(imported_server, page, "A man reads a book in the park.", "walk-imported")
    sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    assert f"{LONG_NAME} · en → de" in sidebar, sidebar  # the whole name and the language pair under the picker


@pytest.mark.slow
def test_watch_attention_form_trains_in_the_browser(server, page):
    """Learn → Watch attention form: press Train with the defaults (two runs, 30 s together); the curves and the
    side-by-side maps draw, with no error and no clipped label."""
    page.goto(f"{server}/watch")
    # the form's submit button (a role query for "Train" also matches the help button of "Training steps")
    page.locator('[data-testid="stBaseButton-primaryFormSubmit"]', has_text="Train").click(
        timeout=FIRST_LOAD_S * 1000)
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot .gtitle')]"
                           ".some(e => e.textContent.startsWith('cross attention'))", timeout=FIRST_LOAD_S * 1000)
    settle(page)
    shot(page, "walk-watch.png")
    assert page.locator('[data-testid="stException"]').count() == 0
    errors = page.locator('[data-testid="stAlertContentError"]').all_text_contents()
    assert not [e for e in errors if widgets.UNEXPECTED in e], errors
    figures = page.evaluate(CLIPPED)
    assert len(figures) >= 2 and not [f for f in figures if f["clipped"]], figures
    assert "without PE" in page.locator('[data-testid="stMain"]').inner_text()


@pytest.fixture(scope="module")
def schemes_server(tmp_path_factory):
    """A server with a tiny model of every positional scheme."""
    from support.app import build_scheme_assets

    assets = build_scheme_assets(tmp_path_factory.mktemp("scheme-assets"))
    with streamlit_server(assets, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


def check_figures(page, name: str) -> list[dict]:
    """The figures drawn now: none with a clipped label, a legend over data or squeezed; returns them."""
    figures = [f for f in page.evaluate(CLIPPED) if f["width"] > 0]  # a hidden tab's figures have no size
    assert figures, f"{name}: no figure drawn"
    assert not [f for f in figures if f["clipped"]], f"{name}: tick labels outside their figure: {figures}"
    assert not [f["title"] for f in figures if f["covers"]], f"{name}: a legend over the data"
    assert not [f["title"] for f in figures if 0 < f["width"] < 200], f"{name}: squeezed figures"
    return figures


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["sinusoidal", "learned", "rope", "alibi", "relative"])
def test_the_positional_page_for_every_scheme(schemes_server, page, scheme):
    """Issue 44: the Positional encoding page with a model of each scheme: its schemes tab and the split of a head's
    scores draw in Chromium, with no error and no clipped label."""
    query = urlencode({"sentence": SENTENCE, "beam": "1", "model": f"tiny-{scheme}"})
    page.goto(f"{schemes_server}/positional?{query}")
    settle(page)
    for tab, title in (("Why did this head look there", "Encoder self-attention, layer 1, head 1"),
                       ("Today's schemes", "Position in the score, each scheme at its defaults")):
        page.get_by_role("tab", name=tab).click()
        page.wait_for_function(f"() => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(e => "
                               f"e.textContent.startsWith({title!r}) && e.getBoundingClientRect().width > 0)",
                               timeout=FIRST_LOAD_S * 1000)
        shot(page, f"positional-{scheme}-{'why' if tab.startswith('Why') else 'schemes'}.png")
        assert page.locator('[data-testid="stException"]').count() == 0, f"{scheme}: an exception box"
        errors = page.locator('[data-testid="stAlertContentError"]').all_text_contents()
        assert not [e for e in errors if widgets.UNEXPECTED in e], f"{scheme}: {errors}"
        check_figures(page, f"{scheme} / {tab}")
    assert "This model's positions" in page.locator('[data-testid="stMain"]').inner_text()


@pytest.mark.slow
def test_the_length_experiment_runs_every_scheme_in_the_browser(schemes_server, page):
    """Issue 44: the Positional encoding page's length experiment, every scheme at 2 s: the progress bar, then the
    accuracy by length and the maps at the unseen length draw with no error and no clipped label."""
    page.goto(f"{schemes_server}/positional?{urlencode({'sentence': SENTENCE, 'beam': '1', 'model': 'tiny-alibi'})}")
    settle(page)
    page.get_by_role("tab", name="Longer than trained").click()
    slider = page.get_by_role("slider", name="Seconds per scheme")
    slider.focus()
    for _ in range(13):  # from 15 down to 2
        page.keyboard.press("ArrowLeft")
    page.get_by_role("button", name="Train and test").click()
    page.wait_for_function("() => [...document.querySelectorAll('.js-plotly-plot .gtitle')].some(e => "
                           "e.textContent.startsWith('copy: exact-sequence accuracy'))", timeout=120_000)
    settle(page)
    shot(page, "positional-length-experiment.png")
    assert page.locator('[data-testid="stException"]').count() == 0
    errors = page.locator('[data-testid="stAlertContentError"]').all_text_contents()
    assert not [e for e in errors if widgets.UNEXPECTED in e], errors
    figures = check_figures(page, "length experiment")
    maps = next(f for f in figures if f["title"].startswith("cross attention"))
    assert maps["width"] > 600
    text = page.locator('[data-testid="stMain"]').inner_text()
    assert all(scheme in text for scheme in ("sinusoidal", "learned", "rope", "alibi", "relative"))


@pytest.fixture(scope="module")
def families_server(tmp_path_factory):
    """A server with a tiny random T5 (v1.1) and mBART-50 model, each imported from its Hugging Face folder."""
    pytest.importorskip("transformers")
    from support.hf_families import build_mbart50_folder, build_t5_folder

    from viz_model.cli.main import main

    assets = tmp_path_factory.mktemp("families-assets")
    for name, folder in (("t5-tiny", build_t5_folder(tmp_path_factory.mktemp("t5"), "1.1")),
                         ("mbart50-tiny", build_mbart50_folder(tmp_path_factory.mktemp("mbart")))):
        assert main(["import", str(folder), "--out", str(assets / name)]) == 0
    with streamlit_server(assets, tmp_path_factory.mktemp("server") / "streamlit.log") as url:
        yield url


@pytest.mark.slow
@pytest.mark.parametrize("model", ["t5-tiny", "mbart50-tiny"])
def test_every_page_with_a_t5_and_an_mbart_model(families_server, page, model):
    """Issue 45: every page in Chromium with an imported T5 and an mBART-50 model (their own positions, norms and
    tokenizers): no exception, figures drawn, none clipped."""
    walk_every_page(families_server, page, "A man reads a book in the park.", f"walk-{model}",
                    {"model": model})
