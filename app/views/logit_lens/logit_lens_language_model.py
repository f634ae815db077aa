"""Logit lens with a language model open: the prompt's residual stream read through the model's unembedding after
each block (a row x position grid of the top token), one token's probability and rank through the rows, and the
attention of the block that changed the chosen cell most."""

from app import completion, sessions
from app.shared_settings import SHARED
from app.views.logit_lens import lens_sections

session = sessions.require_session()
lens_sections.heading()
trace = completion.form_and_completion(session)
prompt = completion.asked_turn(SHARED.sentence.get(""))
lens = lens_sections.measured(lambda track: lens_sections.language_model_lens(session.ref.stored, prompt, track))
lens_sections.every_part(lens, trace, "(the prompt)", ("decoder",))
