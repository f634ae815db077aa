"""The training recipe with a language model open: its run (a model `viz-model train` trained) next to the paper's
recipe, its curves and card, the decoder-only architecture with the tensor shapes for the prompt and its
continuation, and why self-attention (measured live)."""

from app import sessions
from app.views.training import recipe_sections, training_lm

session = sessions.require_session()
model = session.model
recipe_sections.logged_run(
    model, lambda: training_lm.no_log_line(model),
    "How this language model was trained (next-token prediction on its corpus), next to the paper's recipe: Adam with "
    "a warm-up schedule and dropout; its curves show loss and perplexity (BLEU measures translations).",
    training_lm.facts_of(model), training_lm.imported(model), "texts")  # facts: training_facts.json, the recipe
training_lm.architecture_section(session)
recipe_sections.why_self_attention()
