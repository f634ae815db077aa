"""Entry point: `streamlit run app` (from the repository root). A router and the frame shared by every page."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app` puts app/ on the path, not the repository root
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402
import torch  # noqa: E402

from app import sessions, sidebar, state, tracing, widgets  # noqa: E402
from viz_model.nn.devices import steady_allocator  # noqa: E402

LOG = logging.getLogger("viz_model.app")

# a local icon: a material-icon favicon would be fetched from the internet on every page load
steady_allocator()  # long traces come and go: their memory goes back to the system (benchmarks/bench_soak.py)
st.set_page_config(page_title="Attention explorer", page_icon=str(ROOT / "app" / "icon.png"), layout="wide")

PAGES = {
    "explore": st.Page("views/explore.py", title="Translate & explore", icon=":material/translate:", default=True),
    "masks": st.Page("views/masks.py", title="Masks", icon=":material/visibility_off:", url_path="masks"),
    "positional": st.Page("views/positional.py", title="Positional encoding", icon=":material/timeline:",
                          url_path="positional"),
    "by_hand": st.Page("views/attention_by_hand.py", title="Attention by hand", icon=":material/calculate:",
                       url_path="attention-by-hand"),
    "decoding": st.Page("views/decoding.py", title="Decoding step by step", icon=":material/account_tree:",
                        url_path="decoding"),
    "training": st.Page("views/training.py", title="The training recipe", icon=":material/model_training:",
                        url_path="training"),
    "head_roles": st.Page("views/head_roles.py", title="Head roles", icon=":material/category:",
                          url_path="head-roles"),
    "ablation": st.Page("views/ablation.py", title="Ablation", icon=":material/block:", url_path="ablation"),
    "alignment": st.Page("views/alignment.py", title="Alignment & rollout", icon=":material/join_inner:",
                         url_path="alignment"),
    "compare": st.Page("views/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    "attribution": st.Page("views/attribution.py", title="Attribution", icon=":material/insights:",
                           url_path="attribution"),
    "watch": st.Page("views/watch.py", title="Watch attention form", icon=":material/play_circle:",
                     url_path="watch"),
    "sinks": st.Page("views/sinks.py", title="Attention sinks", icon=":material/vertical_align_bottom:",
                     url_path="sinks"),
}
SECTIONS = {"Explore": ["explore", "masks"],
            "Analyze": ["attribution", "head_roles", "ablation", "alignment", "compare", "sinks"],
            "Learn": ["positional", "by_hand", "decoding", "training", "watch"]}
LANGUAGE_MODEL_PAGES = ("explore", "masks", "decoding", "compare", "watch", "sinks", "alignment", "training",
                        "positional", "head_roles", "ablation", "attribution", "by_hand")  # all run with one open


models = sessions.model_names()
if not models:
    page = st.navigation([st.Page("views/no_model.py", title="No model found", icon=":material/error:")])
    page.run()
else:
    state.init_state(models)
    page = st.navigation({section: [PAGES[key] for key in keys] for section, keys in SECTIONS.items()},
                         expanded=True)  # every page listed: thirteen, more than the menu shows folded
    session = sidebar.sidebar(models)
    state.forget_page_link()  # the page drawn below puts its own settings into the link
    try:
        with sessions.serving(session):  # the page gets this run's session from require_session
            page.run()  # every page runs with a language model too (a part that does not: one line there)
    except torch.cuda.OutOfMemoryError:  # not a bug: the request was too big for the GPU (freed; the next one runs)
        tracing.out_of_memory()
    except Exception as err:  # a bug, not a user error: say so plainly, log the traceback for the developers
        LOG.exception("page %s failed", page.title)
        st.error(f"{widgets.UNEXPECTED} ({type(err).__name__}: {err}). Try another setting; if it persists, "
                 "report it with the link from “Copy link”.")
    state.sync_url()
