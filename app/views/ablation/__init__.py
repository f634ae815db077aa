"""Ablation: a script per kind of model."""
