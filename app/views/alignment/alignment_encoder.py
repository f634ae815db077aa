"""Alignment & rollout with an encoder open: no word alignment (it reads cross-attention), attention rollout and flow
(Abnar & Zuidema, 2020, who introduced them on BERT) through the encoder's self-attention layers over the text."""

import streamlit as st

from app import fill_in, sessions
from app.views.alignment import rollout_section

NO_ALIGNMENT = ("Word alignment reads cross-attention (which source word each target word looked at); an encoder reads "
                "one text with self-attention alone, so this page shows rollout and flow only.")

session = sessions.require_session()
st.title("Alignment & rollout")
st.caption("Rollout and flow follow attention through every layer at once: how much each position of the text draws, "
           "layer after layer, on each of its tokens, [CLS] and [SEP] included.")
st.info(NO_ALIGNMENT)
trace = fill_in.reading_or_stop(session)
rollout_section.rollout_section(
    trace, ("encoder",), "A layer's attention mixes tokens that earlier layers already mixed. Rollout multiplies the "
    "layers' head-averaged maps, each mixed with the identity for the residual connection (every row a distribution); "
    "flow treats the maps as a network of pipes and asks how much can flow from each token to each position. Abnar & "
    "Zuidema (2020) introduced both on BERT: the raw attention of the last layers is nearly uniform, while rollout "
    "and flow still tell which input tokens a position draws on (read a mask token's row: where its prediction "
    "comes from).")
