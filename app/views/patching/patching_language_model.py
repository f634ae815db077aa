"""Head patching with a language model open (its script in the page registry): `patching_lm.page`."""

from app import sessions
from app.views.patching import patching_lm

patching_lm.page(sessions.require_session())
