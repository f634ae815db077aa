"""Entry point: `streamlit run app` (from the repository root). A router (the pages of `registry`, for the kind of
model the sidebar opened) and the frame shared by every page."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app` puts app/ on the path, not the repository root
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
import torch  # noqa: E402

from app import chart_preload, registry, sessions, state, tracing, widgets  # noqa: E402
from viz_model.nn.devices import steady_allocator  # noqa: E402

LOG = logging.getLogger("viz_model.app")

# a local icon: a material-icon favicon would be fetched from the internet on every page load
steady_allocator()  # long traces come and go: their memory goes back to the system (benchmarks/bench_soak.py)
st.set_page_config(page_title="Attention explorer", page_icon=str(ROOT / "app" / "icon.png"), layout="wide")

models = sessions.picker_names()  # the model directories, then any checkpoint series (a model across its training)
if not models:
    page = st.navigation([st.Page(registry.NO_MODEL, title="No model found", icon=":material/error:")])
    page.run()
else:
    state.init_state(models)
    kind, session = registry.open_model(models)  # the sidebar: the model, its kind (asked once here) and settings
    with st.sidebar:  # its end: the hidden element's placeholder, drawn while its part loads, moves nothing
        chart_preload.preload_charts()  # the browser fetches the chart script while the page runs (a shared link)
    page = st.navigation(registry.navigation(kind), expanded=True)  # every page listed: thirteen, more than the
    state.forget_page_link()  # menu shows folded; the page drawn below puts its own settings into the link
    try:
        with sessions.serving(session):  # the page gets this run's session from require_session
            page.run()  # the script the registry names for this kind (a page that does not apply: its one line)
    except torch.cuda.OutOfMemoryError:  # not a bug: the request was too big for the GPU (freed; the next one runs)
        tracing.out_of_memory()
    except Exception as err:  # a bug, not a user error: say so plainly, log the traceback for the developers
        LOG.exception("page %s failed", page.title)
        st.error(f"{widgets.UNEXPECTED} ({type(err).__name__}: {err}). Try another setting; if it persists, "
                 "report it with the link from “Copy link”.")
    state.sync_url()
