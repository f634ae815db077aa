"""Attention sinks: a script per kind of model."""
