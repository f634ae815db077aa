"""Exported HTML (app/figure_files.py) opened in headless Chromium: markup in token labels and translations stays text.

Every figure the app draws from a trace is exported with `figure_files.figure_html`, written to a file and opened in
Debian's Chromium (file:// only, nothing leaves the machine); hovering the plot renders its hover labels too. No
script from the input may run (window.__pwned stays undefined, no dialog opens), no element may carry an event
handler or a javascript: link made from it, and the labels must show the markup literally, as characters.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from support.app import INJECTION, TINY_MODEL  # noqa: E402
from support.browser import CHROMIUM  # noqa: E402

import viz_model  # noqa: E402
from app import figure_files  # noqa: E402
from viz_model.plot import by_hand_figures, decoding_figures, map_figures, masking_figures  # noqa: E402
from viz_model.trace import AttentionTrace  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"),
]

PAYLOADS = [
    INJECTION,  # alert(): caught as a dialog by the page fixture
    "<img src=x onerror=window.__pwned=1>",
    "<script>window.__pwned=1</script>",
    "</script><script>window.__pwned=1</script>",  # tries to close the script tag holding the figure's JSON
    '"><svg onload=window.__pwned=1>',  # tries to leave an attribute
    '<a href="javascript:window.__pwned=1">link</a>',  # Plotly renders <a href> in labels
    "<iframe srcdoc='<script>parent.__pwned=1</script>'></iframe>",
    "&lt;script&gt;window.__pwned=1&lt;/script&gt;",  # already-escaped text must not be unescaped into markup
]

# After loading and hovering: did anything from the input run or turn into markup?
PROBE = """() => ({
  pwned: typeof window.__pwned !== 'undefined',
  images: document.querySelectorAll('img, iframe, [data-testid=injected]').length,
  handlers: [...document.querySelectorAll('*')].flatMap((e) => [...e.attributes]
      .filter((a) => a.name.startsWith('on') || (/href|src/.test(a.name) && /javascript:|__pwned/i.test(a.value)))
      .map((a) => `${e.tagName} ${a.name}=${a.value}`)),
  labels: [...document.querySelectorAll('.main-svg text')].map((e) => e.textContent),
})"""


@pytest.fixture(scope="module")
def traces(assets) -> dict[str, AttentionTrace]:
    """A real trace of the injection (forced target too), and one whose every label is a whole payload."""
    model = viz_model.load(assets / TINY_MODEL, device="cpu")
    real = model.trace(INJECTION, beam=1, target=INJECTION)
    cycle = itertools.cycle(PAYLOADS)
    relabel = {name: [next(cycle) for _ in getattr(real, name)]
               for name in ("source_tokens", "target_tokens", "output_tokens")}
    whole = dataclasses.replace(real, source_text=" ".join(PAYLOADS), translation=" ".join(PAYLOADS), **relabel)
    return {"pieces": real, "payloads": whole}


def figures_of(trace: AttentionTrace) -> dict[str, object]:
    """One figure of each way the app puts tokens on screen: tick labels, hover data, scatter text, subplot titles,
    bar labels and titles (each exported page inlines plotly.js, so opening one costs a second or more)."""
    src, tgt = trace.source_tokens, trace.target_tokens
    return {
        "heatmap": map_figures.head_heatmap(trace, "cross", trace.num_layers["cross"] - 1, 0),
        "model-view": map_figures.model_view(trace, "decoder"),
        "head-view": map_figures.head_view(trace, "cross", 0, list(range(trace.num_heads))),
        "token-focus": map_figures.token_focus(trace, "cross", "query", 1),
        "mask": masking_figures.mask_matrix_figure(trace.decoder_mask, tgt, tgt, tgt[-1]),
        "top-k": decoding_figures.topk_figure(src[:4], [0.4, 0.3, 0.2, 0.1], src[0], 0),
        "heads": by_hand_figures.heads_figure(trace.encoder_attentions[0], src, src[2]),
    }


@pytest.mark.parametrize("which", ["pieces", "payloads"])
def test_exported_html_never_runs_markup_from_the_input(traces, page, tmp_path, which):
    built = figures_of(traces[which])
    names = list(built) if which == "payloads" else ["heatmap", "head-view", "token-focus"]
    for name in names:
        fig = built[name]
        path = tmp_path / f"{which}-{name}.html"
        path.write_text(figure_files.figure_html(fig), encoding="utf-8")
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        box = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
        for fx, fy in ((0.1, 0.1), (0.5, 0.5), (0.9, 0.9)):  # hover labels are rendered from the same text
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            page.wait_for_timeout(50)
        found = page.evaluate(PROBE)
        assert not found["pwned"] and found["images"] == 0 and found["handlers"] == [], (name, found)
        if which == "payloads" and name in ("heatmap", "head-view", "mask", "heads"):
            shown = "\n".join(found["labels"])
            assert PAYLOADS[1] in shown and PAYLOADS[-1] in shown, (name, found["labels"][:20])
    assert page.dialogs == []
