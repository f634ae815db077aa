"""Logit lens: a script per kind of model (a language model, a translator's decoder) on shared sections."""
