"""Watch attention form: one script for every kind of model."""
