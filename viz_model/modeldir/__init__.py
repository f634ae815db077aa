"""A model directory on disk: weights, config and tokenizer read under checks, and what it says about its training
(facts, per-token coverage) and its languages."""
