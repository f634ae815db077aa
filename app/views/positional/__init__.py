"""Positional encoding: a script per kind of model."""
