"""Compare: a script per kind of model."""
