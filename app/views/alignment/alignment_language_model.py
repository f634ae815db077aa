"""Alignment & rollout with a language model open (its script in the page registry): `alignment_lm.page`."""

from app import sessions
from app.views.alignment import alignment_lm

alignment_lm.page(sessions.require_session())
