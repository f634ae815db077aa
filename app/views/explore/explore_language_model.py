"""Complete & explore (home) with a language model open: the prompt, its continuation, then the attention views
(`explore_views`, drawn as `explore_lm_parts` says), and a mixture of experts' routing (`routing_section`)."""

import streamlit as st

from app import completion, sessions, state
from app.page_settings import EXPLORE as own
from app.views.explore import explore_lm_parts, explore_views
from app.views.explore.routing_section import routing_section
from viz_model.trace import AttentionTrace


def panel(trace: AttentionTrace) -> None:
    """The continuation, the link and downloads, the decoding steps."""
    completion.completion_panel(trace)
    explore_views.link_and_downloads(trace)
    completion.completion_steps(trace)


session = sessions.require_session()
st.title("Complete & explore")
st.caption("Type a prompt: see the language model continue it, and every attention head of every layer as it "
           "reads the prompt and writes the continuation.")
state.page_link(own)
state.show_url_problems()
trace = explore_views.page(session, completion.prompt_form, lambda: completion.current_completion(session), panel,
                           lambda trace: explore_lm_parts.PARTS)
routing_section(trace)  # a mixture of experts' routing (nothing otherwise)
