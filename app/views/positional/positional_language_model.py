"""Positional encoding with a language model open (its script in the page registry): `position_lm_tabs.page`."""

from app import sessions
from app.views.positional import position_lm_tabs

position_lm_tabs.page(sessions.require_session())
