"""The long-prompt token picker (Streamlit AppTest, no model): a picked position kept while the prompt holds it, and
the page's own default (Alignment & rollout's last token, Attention by hand's prompt end) where a new, shorter
prompt does not."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def picker_page() -> None:
    import streamlit as st

    from app import token_picker
    from app.setting_types import Setting

    n = st.session_state.get("n", 600)
    st.session_state["picked"] = token_picker.token_picker([f"t{i}" for i in range(n)], Setting("tp_token", ""),
                                                           what="query token", default=n - 1)


def test_a_position_past_a_shorter_prompt_falls_back_to_the_default():
    at = AppTest.from_function(picker_page)
    at.session_state["tp_token"] = "q550"
    at.run()
    assert not at.exception and at.session_state["picked"] == 550  # the prompt holds it: kept
    at.session_state["n"] = 400  # a shorter prompt: 550 is past its end
    at.run()
    assert not at.exception and at.session_state["picked"] == 399 and at.session_state["tp_token"] == "q399"
