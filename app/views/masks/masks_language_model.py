"""Masks with a language model open (its script in the page registry): `masks_lm.page`."""

from app import sessions
from app.views.masks import masks_lm

masks_lm.page(sessions.require_session())
