"""Figure and data exports: interactive HTML, PNG and SVG (Plotly + kaleido), CSV. No Streamlit here.

kaleido 1.x renders images through a Chrome/Chromium browser. We look for one (``BROWSER_PATH``, then
``chromium``, ``chromium-browser``, ``google-chrome`` on the PATH) and render PNG and SVG in one browser session,
so an export costs one browser start, not two.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import plotly.graph_objects as go

IMAGE_FORMATS = ("png", "svg")
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
RENDER_TIMEOUT_S = 90
DEFAULT_WIDTH = 1100


class ExportError(RuntimeError):
    """An image could not be rendered; the message says why and what to do."""


def standalone(fig: go.Figure) -> go.Figure:
    """A copy of `fig` that lays itself out without the app: every axis makes room for its tick labels.

    In the app process Streamlit makes its own theme Plotly's default template, and that theme leaves margins to
    the app's client; an exported file has no such client, so labels would fall off the canvas."""
    out = go.Figure(fig)
    out.update_xaxes(automargin=True)
    out.update_yaxes(automargin=True)
    return out


def figure_html(fig: go.Figure) -> str:
    """A self-contained interactive HTML page (plotly.js inlined: works offline)."""
    return standalone(fig).to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False})


def find_browser() -> str | None:
    """The Chrome/Chromium kaleido will use, or None."""
    configured = os.environ.get("BROWSER_PATH")
    if configured:
        return configured if os.path.isfile(configured) and os.access(configured, os.X_OK) else None
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def images_available() -> tuple[bool, str]:
    """(can render, why not)."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False, "PNG/SVG export needs the `kaleido` package: `pip install kaleido`."
    if find_browser() is None:
        return False, ("PNG/SVG export renders through Chrome or Chromium, and none was found. Install one "
                       "(e.g. `apt-get install chromium`) or set BROWSER_PATH to its executable.")
    return True, ""


def figure_images(fig: go.Figure, formats: tuple[str, ...] = IMAGE_FORMATS, width: int | None = None,
                  scale: float = 2.0) -> dict[str, bytes]:
    """Render `fig` to each format (``png``, ``svg``) in one browser session; `ExportError` on any failure."""
    for f in formats:
        if f not in IMAGE_FORMATS:
            raise ExportError(f"unknown image format {f!r}; use one of {', '.join(IMAGE_FORMATS)}")
    ok, why = images_available()
    if not ok:
        raise ExportError(why)
    browser = find_browser()
    if browser and not os.environ.get("BROWSER_PATH"):
        os.environ["BROWSER_PATH"] = browser  # choreographer (kaleido's browser driver) reads it
    height = fig.layout.height or 500
    spec = standalone(fig).to_dict()
    opts = {"width": width or DEFAULT_WIDTH, "height": height}

    async def render() -> dict[str, bytes]:
        import kaleido

        async with kaleido.Kaleido(n=1, timeout=RENDER_TIMEOUT_S) as k:
            return {f: await k.calc_fig(spec, opts={**opts, "format": f, "scale": scale if f == "png" else 1})
                    for f in formats}

    # A fresh thread owns a fresh event loop, whatever loop the caller (Streamlit, pytest) runs.
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(asyncio.run, render())
        try:
            return future.result(timeout=RENDER_TIMEOUT_S + 30)
        except FutureTimeout:
            raise ExportError(f"rendering took more than {RENDER_TIMEOUT_S + 30} s; try again") from None
        except Exception as err:  # kaleido/choreographer raise many types; the user needs one message
            raise ExportError(f"the image could not be rendered ({type(err).__name__}: {err}). "
                              "Download the interactive HTML instead, or check that Chromium starts.") from None
