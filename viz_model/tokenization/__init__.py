"""Tokenizers: this project's own (trained with the model) and the published ones of imported models."""
