"""The training recipe with an encoder open: its run (a model `viz-model train` trained with the masked-language-model
objective) next to the paper's recipe, its curves (masked-token loss and perplexity) and card, its held-out
masked-token accuracy, the encoder-only stack with the tensor shapes for the text, and why self-attention; one line
where it has no training log (an imported encoder)."""

from app import sessions
from app.views.training import recipe_sections, training_mlm
from viz_model.modeldir.training_facts import load_training_facts

session = sessions.require_session()
model = session.model
events = recipe_sections.logged_run(
    model, lambda: training_mlm.no_log_line(model),
    "How this encoder was trained (masked-language modelling: tokens hidden in each sentence and predicted from both "
    "sides), next to the paper's recipe: Adam with a warm-up schedule and dropout; its curves show the loss and "
    "perplexity per masked token.", load_training_facts(model.directory), False, "sentences", "masked token")
training_mlm.held_out_section(events)
training_mlm.architecture_section(session)
recipe_sections.why_self_attention()
