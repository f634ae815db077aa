"""Masks: a script per kind of model."""
