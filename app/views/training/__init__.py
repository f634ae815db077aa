"""The training recipe: a script per kind of model."""
