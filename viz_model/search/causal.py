"""Searching a decoder-only language model's continuation: its rows scored one step at a time from a prompt, with
the key/value cache reordered as the rows move (what transformers' beam search, `transformers_search`, asks of a
scorer)."""

from __future__ import annotations

import torch
from torch import Tensor

from ..nn.attention import KVCache
from ..nn.causal_lm import CausalLM
from .hypotheses import Hypothesis
from .settings import HFGeneration
from .transformers_rule import transformers_search


class CausalScorer:
    """`rows` copies of a prompt, continued one token a step (`scores`, then `advance`)."""

    def __init__(self, network: CausalLM, prompt: list[int], rows: int) -> None:
        self.network = network
        device = next(network.parameters()).device
        out = network(torch.tensor([prompt] * rows, device=device))
        self.cache: list[KVCache] = out.cache
        self.logits: Tensor = out.logits[:, -1].float()
        self.pending: Tensor | None = None

    def scores(self, live: list[bool] | None = None) -> Tensor:
        """``(rows, vocab)`` float32 logits of each row's next token."""
        if self.pending is not None:
            out = self.network(self.pending, cache=self.cache)
            self.cache, self.logits, self.pending = out.cache, out.logits[:, -1].float(), None
        return self.logits

    def advance(self, parents: list[int], tokens: list[int]) -> None:
        """Row i of the next step continues row ``parents[i]`` with ``tokens[i]``."""
        device = self.logits.device
        if parents != list(range(len(parents))):
            index = torch.tensor(parents, device=device)
            self.cache = [layer.index_select(index) for layer in self.cache]
        self.pending = torch.tensor(tokens, device=device).view(-1, 1)


@torch.inference_mode()
def beam_continuation(network: CausalLM, prompt: list[int], beam: int, max_new_tokens: int,
                      eos_ids: list[int]) -> Hypothesis:
    """The best continuation of `prompt` as transformers' ``generate(num_beams=beam, do_sample=False)`` finds it
    (length_penalty 1, early_stopping False), ending at any of `eos_ids` or after `max_new_tokens`."""
    settings = HFGeneration(num_beams=beam, max_length=max_new_tokens + 1)
    return transformers_search(network, CausalScorer(network, prompt, beam), 1, settings, beam,  # type: ignore[arg-type]
                               settings.length_penalty, eos_ids=eos_ids)[0]
