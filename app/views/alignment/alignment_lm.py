"""Alignment & rollout with a language model open: no word alignment (it reads cross-attention), attention rollout and
flow through the model's causal self-attention layers over the prompt and its continuation."""

from __future__ import annotations

import streamlit as st

from app import completion
from app.sessions import Session
from app.views.alignment import rollout_section

NO_ALIGNMENT = ("Word alignment reads cross-attention (which source word each target word looked at); a language "
                "model has no source and no cross-attention, so this page shows rollout and flow only.")


def page(session: Session) -> None:
    """The Alignment & rollout page for the language model of `session`."""
    st.title("Alignment & rollout")
    st.caption("Rollout and flow follow attention through every layer at once: how much each later position draws, "
               "layer after layer, on each earlier token of the prompt and its continuation.")
    st.info(NO_ALIGNMENT)
    completion.prompt_form()
    trace = completion.current_completion(session)
    if trace is None:
        st.stop()
    rollout_section.rollout_section(
        trace, ("decoder",), "A layer's attention mixes tokens that earlier layers already mixed. Rollout multiplies "
        "the layers' head-averaged causal maps (with the residual connection as the identity, as for the encoder), "
        "so it stays causal: position t draws on tokens 0..t only; flow treats the maps as a network of pipes and asks "
        "how much can flow from each token to each later position (Abnar & Zuidema, 2020).")
