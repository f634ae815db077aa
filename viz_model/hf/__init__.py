"""Hugging Face folders: importing a supported transformers model exactly, and exporting ours as a Marian folder."""
