"""Fill in the blank & explore (home) with an encoder open: the sentence with its mask tokens (and an optional second
sentence), the model's top-k at each mask, then the attention views (`explore_views`, drawn as
`explore_encoder_parts` says)."""

import streamlit as st

from app import fill_in, sessions, state
from app.page_settings import EXPLORE as own
from app.views.explore import explore_encoder_parts, explore_views
from viz_model.trace import AttentionTrace


def panel(trace: AttentionTrace) -> None:
    """The text filled in and the top-k at each mask, the link and downloads."""
    fill_in.fill_in_panel(trace, session.model)
    explore_views.link_and_downloads(trace)


session = sessions.require_session()
st.title("Fill in the blank & explore")
st.caption(f"Type a sentence with {fill_in.mask_code(session.model.mask_token)} in it, or click a word to mask it: "
           "see the words the encoder would fill in, and every attention head of every layer as it reads the whole "
           "text at once.")
state.page_link(own)
state.show_url_problems()
explore_views.page(session, lambda: fill_in.text_form(session), lambda: fill_in.current_reading(session), panel,
                   lambda trace: explore_encoder_parts.parts(session, trace))
