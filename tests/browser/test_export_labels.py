"""Exported images keep their token labels: every exported SVG is opened in headless Chromium and each tick label's
box must lie inside the image, and the heatmap's labels must be the trace's tokens.

The export runs as it does inside the app: Streamlit makes its theme Plotly's default template, and that theme
leaves margins to the app's client, so a figure exported from the app lost every tick label off the canvas.
"""

from __future__ import annotations

import os

import numpy as np
import plotly.io as pio
import pytest
from support.app import TINY_MODEL  # noqa: E402
from support.browser import CHROMIUM  # noqa: E402

import viz_model  # noqa: E402
from app import figure_files  # noqa: E402
from viz_model.plot import analysis_figures, decoding_figures, map_figures, positional_trace_figures  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
]

SENTENCE = "My grandmother bakes bread every Sunday morning."

# Each tick label's box and the image's size, measured by the browser that renders the SVG.
MEASURE = """() => {
  const svg = document.querySelector('svg.main-svg');
  const frame = svg.getBoundingClientRect();
  const ticks = [...document.querySelectorAll('.xtick text, .ytick text')].map((e) => {
    const b = e.getBoundingClientRect();
    return {axis: e.parentNode.getAttribute('class'), text: e.textContent,
            left: b.left - frame.left, top: b.top - frame.top, right: b.right - frame.left,
            bottom: b.bottom - frame.top};
  });
  return {width: frame.width, height: frame.height, ticks};
}"""


@pytest.fixture
def app_theme(monkeypatch):
    """Plotly's default template as the app process has it (Streamlit's theme)."""
    import streamlit.elements.plotly_chart  # noqa: F401  (registers the "streamlit" template)

    monkeypatch.setattr(pio.templates, "default", "streamlit")


class RunningKaleido:
    """`kaleido.Kaleido` as `figure_files.figure_images` opens it (``async with``, then `calc_fig`), handing each
    figure to kaleido's running sync server: the same rendering, in a browser started once for the module."""

    def __init__(self, **options) -> None:
        self.options = options

    async def __aenter__(self) -> RunningKaleido:
        return self

    async def __aexit__(self, *exc_info) -> None:
        return None

    async def calc_fig(self, fig, opts=None, **kwargs) -> bytes:
        import kaleido

        return kaleido.calc_fig_sync(fig, opts=opts, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def one_image_browser():
    """The module's exports render in one kaleido browser, started as `figure_images` starts its own (the same
    Chromium, `n` and timeout), instead of a browser per figure (seconds each); the images are the same."""
    kaleido = pytest.importorskip("kaleido")
    with pytest.MonkeyPatch.context() as patch:
        browser = figure_files.find_browser()
        if browser and not os.environ.get("BROWSER_PATH"):
            patch.setenv("BROWSER_PATH", browser)  # as figure_images sets it: kaleido's browser driver reads it
        kaleido.start_sync_server(n=1, timeout=figure_files.RENDER_TIMEOUT_S)
        patch.setattr(kaleido, "Kaleido", RunningKaleido)
        try:
            yield
        finally:
            kaleido.stop_sync_server()


@pytest.fixture(scope="module")
def model(assets):
    return viz_model.load(assets / TINY_MODEL, device="cpu")


def rendered_ticks(page, fig, tmp_path, name: str) -> dict:
    svg = figure_files.figure_images(fig, formats=("svg",))["svg"]
    path = tmp_path / f"{name}.svg"
    path.write_bytes(svg)
    page.goto(path.as_uri())
    return page.evaluate(MEASURE)


def assert_inside(found: dict, name: str) -> None:
    assert found["ticks"], f"{name}: no tick labels rendered"
    outside = [t for t in found["ticks"] if t["text"].strip() and (
        t["left"] < -0.5 or t["top"] < -0.5 or t["right"] > found["width"] + 0.5
        or t["bottom"] > found["height"] + 0.5)]
    assert not outside, f"{name}: tick labels outside the {found['width']}x{found['height']} image: {outside[:4]}"


def test_exported_heatmap_keeps_the_trace_tokens_inside_the_image(app_theme, model, page, tmp_path):
    trace = model.trace(SENTENCE, beam=1)
    for kind in ("encoder", "decoder", "cross"):
        fig = map_figures.head_heatmap(trace, kind, trace.num_layers[kind] - 1, 0)
        found = rendered_ticks(page, fig, tmp_path, kind)
        assert_inside(found, kind)
        queries, keys = trace.axes(kind)
        x = [t["text"] for t in found["ticks"] if t["axis"] == "xtick"]
        y = [t["text"] for t in found["ticks"] if t["axis"] == "ytick"]
        assert x == list(keys) and y == list(queries), kind


def test_every_exported_figure_keeps_its_tick_labels_inside_the_image(app_theme, model, page, tmp_path):
    trace = model.trace(SENTENCE, beam=1)
    heads = trace.num_heads
    counts = trace.num_layers
    roles = {kind: np.arange(counts[kind] * heads, dtype=float).reshape(counts[kind], heads) for kind in counts}
    built = {
        "model-view": map_figures.model_view(trace, "cross"),
        "head-view": map_figures.head_view(trace, "cross", 0, list(range(heads))),
        "token-focus": map_figures.token_focus(trace, "cross", "query", 1),
        "pe-tokens": positional_trace_figures.positional_heatmap(trace.source_positional, trace.source_tokens),
        "pe-similarity": positional_trace_figures.positional_similarity(trace.source_positional, trace.source_tokens),
        "beam-tree": decoding_figures.beam_tree_figure(model.beam_tree(SENTENCE, beam=3), model.tokenizer.piece),
        "head-grid": analysis_figures.head_grid(roles, "a value per head", "value"),
    }
    for name, fig in built.items():
        assert_inside(rendered_ticks(page, fig, tmp_path, name), name)
