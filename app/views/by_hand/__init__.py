"""Attention by hand: a script per kind of model."""
