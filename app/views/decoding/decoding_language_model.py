"""Decoding step by step with a language model open (its script in the page registry): `decoding_lm.page`."""

from app import sessions
from app.views.decoding import decoding_lm

decoding_lm.page(sessions.require_session())
