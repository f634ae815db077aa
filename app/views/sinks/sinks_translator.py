"""Attention sinks with a translation model open: its decoder self-attention's share on the first token (a layer x
head grid), the other tokens that draw a large share and why softmax needs such a place; the switch that hides the
first token runs with a language model."""

import streamlit as st

from app import sessions, tracing
from app.views.sinks import sink_sections
from viz_model.analysis.sinks import HEAVY_SHARE, trace_sink_shares

session = sessions.require_session()
sink_sections.heading()
trace = tracing.trace_or_stop(session)
shares = sink_sections.measured(lambda: trace_sink_shares(trace, HEAVY_SHARE))
sink_sections.every_part(shares, "(the decoder's self-attention over the translation)", None)
st.info("The switch that removes the sink runs with a language model: pick one in the sidebar.")
