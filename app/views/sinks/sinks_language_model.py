"""Attention sinks with a language model open: each head's share on the first token of the prompt and its
continuation (a layer x head grid), the other tokens that draw a large share, why softmax needs such a place, and the
switch that hides the first token (next-token distribution and continuation before and after)."""

import streamlit as st

from app import completion, sessions
from app.page_settings import EXPLORE
from app.shared_settings import SHARED
from app.views.sinks import eviction_section, sink_sections, sinks_lm
from app.views.sinks.learned_sink_section import learned_sinks

session = sessions.require_session()
sink_sections.heading()
completion.prompt_form()
trace = completion.current_completion(session)
if trace is None:
    eviction_section.eviction_section(session)  # it needs no prompt
    st.stop()
shares = sink_sections.measured(lambda: sinks_lm.lm_shares(
    trace, session.ref.stored, SHARED.sentence.get(""), int(EXPLORE.new_tokens.get()), EXPLORE.chat.get(),
    EXPLORE.system.get("")))
sink_sections.every_part(shares, "(prompt and continuation)", completion.prompt_length(trace))
learned_sinks(trace, shares)  # a model with learned sink logits (gpt-oss): their share beside the first token's
sinks_lm.switch_section(session.ref.stored, shares, trace, completion.asked_turn(SHARED.sentence.get("")),
                        int(EXPLORE.new_tokens.get()))
eviction_section.eviction_section(session)
