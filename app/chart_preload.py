"""The browser's Plotly chart script, loaded as a session's first run draws its sidebar: Streamlit's frontend asks for
it only when the first chart arrives, so a shared link's first heatmap waited for its 4.6 MB after the server's run."""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path

import streamlit as st

MARK = "viz-chart-preload"
# The script imports the chunk at the URL Streamlit's own loader uses (beside the frontend's index script), so the
# frontend's import later finds the module loaded and run; a page without that script imports nothing. The style
# hides the element itself (no space, no gap).
PRELOAD = """<style>[data-testid="stElementContainer"]:has(.{mark}) {{display: none}}</style>
<span class="{mark}"></span>
<script type="module">
const index = document.querySelector('script[type="module"][src*="/static/js/index."]');
if (index) import(new URL("{chunk}", index.src).href).catch(() => {{}});
</script>"""


@cache
def plotly_chunk() -> str | None:
    """The file name of the Streamlit frontend's Plotly chart script (None: not exactly one found)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


def preload_charts() -> None:
    """A hidden element whose script loads the Plotly chart script now, while the server runs the page (nothing where
    the frontend's file is not found or `st.html` runs no scripts)."""
    chunk = plotly_chunk()
    if chunk is None or "unsafe_allow_javascript" not in inspect.signature(st.html).parameters:
        return
    st.html(PRELOAD.format(mark=MARK, chunk=chunk), unsafe_allow_javascript=True)
