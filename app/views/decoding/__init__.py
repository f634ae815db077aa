"""Decoding step by step: a script per kind of model."""
