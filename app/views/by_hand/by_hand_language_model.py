"""Attention by hand with a language model open (its script in the page registry): `by_hand_lm.page`."""

from app import sessions
from app.views.by_hand import by_hand_lm

by_hand_lm.page(sessions.require_session())
