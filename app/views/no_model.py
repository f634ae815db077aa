"""Shown when no model directory exists: what to run to get one. Never a traceback."""

import streamlit as st

from app import sessions

root = sessions.asset_roots()[0]
st.title("No model found")
st.error(f"The explorer found no model directory in `{sessions.roots_label()}` (a model directory holds "
         "`model.safetensors`, `config.json` and `tokenizer.model`).")
st.markdown("Train one and export it there, for example:")
st.code("pip install -e .\n"
        "viz-model train --config configs/multi30k-en-de.toml --run-dir runs/m30k\n"
        f"viz-model export runs/m30k --out {root}/multi30k-en-de\n"
        "streamlit run app", language="bash")
st.markdown("To use models stored elsewhere, point the app at their parent folder: `viz-model app --models "
            "/data/models`, or the `VIZ_MODEL_ASSETS` environment variable (several folders separated by `:`), e.g. "
            "`VIZ_MODEL_ASSETS=/data/models streamlit run app`. Then reload this page.")
if st.button("Look again", icon=":material/refresh:"):
    st.rerun()
