"""Compare with a language model open (its script in the page registry): `compare_lm.page`."""

from app import sessions
from app.views.compare import compare_lm

compare_lm.page(sessions.require_session())
