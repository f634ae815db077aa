"""Translate & explore / Complete & explore: a script per kind of model on the shared parts."""
