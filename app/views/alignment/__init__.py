"""Alignment & rollout: a script per kind of model."""
