"""A language model's recorded beam search: `beam_continuation`'s search with every step kept, as a `BeamTree`."""

from __future__ import annotations

import torch

from ..nn.causal_lm import CausalLM
from .causal import CausalProcessors, CausalScorer, LMSearch
from .hypotheses import BeamStep, BeamTree
from .settings import HFGeneration
from .transformers_rule import transformers_search


@torch.inference_mode()
def causal_beam_tree(network: CausalLM, prompt: list[int], beam: int, alpha: float, max_new_tokens: int,
                     eos_ids: list[int], search: LMSearch = LMSearch()) -> BeamTree:
    """The continuation of `prompt` as `beam_continuation` finds it (transformers' rule, `alpha` as its length
    penalty), each step's hypotheses and ranked continuations recorded (beam 1: greedy, one a step)."""
    if not prompt:
        raise ValueError("the prompt has no tokens: a search needs at least one")
    settings = HFGeneration(num_beams=beam, max_length=max_new_tokens + 1, length_penalty=alpha,
                            early_stopping=search.early_stopping)
    steps: list[BeamStep] = []
    best = transformers_search(network, CausalScorer(network, prompt, beam), 1, settings, beam,  # type: ignore[arg-type]
                               alpha, steps, eos_ids=eos_ids, processors=CausalProcessors(search, prompt))[0]
    return BeamTree.recorded(steps, best, beam, alpha, max_new_tokens, "transformers")
