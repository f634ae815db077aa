"""Logit lens with a translator open: its decoder's residual stream over the translation read through the decoder's
final norm and output projection after each layer (a row x position grid of the top token), one token's probability
and rank through the rows, and the self- and cross-attention of the layer that changed the chosen cell most."""

from app import sessions, tracing
from app.views.logit_lens import lens_sections

session = sessions.require_session()
lens_sections.heading()
trace = tracing.trace_or_stop(session)
output = tuple(trace.output_ids)
lens = lens_sections.measured(lambda track: lens_sections.translator_lens(session.ref, trace.source_text, output,
                                                                          track))
lens_sections.every_part(lens, trace, "(the decoder over the translation)", ("decoder", "cross"))
