"""Head patching: a language model's script (the other kinds: one line why not, in the registry)."""
