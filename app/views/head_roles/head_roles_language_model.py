"""Head roles with a language model open (its script in the page registry): `head_roles_lm.page`."""

from app import sessions
from app.views.head_roles import head_roles_lm

head_roles_lm.page(sessions.require_session())
