"""Searching a decoder-only language model's continuation: its rows scored one step at a time from a prompt, with
the key/value cache reordered as the rows move (what transformers' beam search, `transformers_search`, asks of a
scorer), under the search settings of the model's generation config (`LMSearch`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..nn.attention import KVCache
from ..nn.causal_lm import CausalLM
from .hypotheses import Hypothesis
from .settings import HFGeneration
from .transformers_rule import repeated_ngram_ends, transformers_search


@dataclass(frozen=True)
class LMSearch:
    """The search settings of a language model's generation config, applied as ``generate(do_sample=False)`` applies
    them: the beam width (1: greedy), length penalty and early stopping of its beam search, the repetition penalty
    and the n-gram size never repeated (both over prompt and continuation).

    :ivar num_beams: the beam `complete` searches with unless told one
    :ivar length_penalty: the exponent of the length in a finished beam's score
    :ivar early_stopping: True, False or "never", as transformers reads it
    :ivar repetition_penalty: a seen id's logit divided by it (multiplied where negative); 1: off
    :ivar no_repeat_ngram_size: no n-gram of this size occurs twice; 0: off
    """

    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0

    def __post_init__(self) -> None:
        HFGeneration(num_beams=self.num_beams, length_penalty=self.length_penalty,  # its checks, one line each
                     early_stopping=self.early_stopping, no_repeat_ngram_size=self.no_repeat_ngram_size)
        penalty = self.repetition_penalty
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not penalty > 0:
            raise ValueError(f"repetition_penalty must be a number above 0, got {penalty!r}")

    def processed(self, scores: Tensor, rows: list[list[int]]) -> Tensor:
        """``(rows, vocab)`` `scores` after the repetition penalty and the n-gram ban, row i's ids so far being
        ``rows[i]`` (prompt included), in transformers' order."""
        if self.repetition_penalty != 1.0:
            ids = torch.tensor(rows, device=scores.device)
            seen = scores.gather(1, ids)
            seen = torch.where(seen < 0, seen * self.repetition_penalty, seen / self.repetition_penalty)
            scores = scores.scatter(1, ids, seen)
        if self.no_repeat_ngram_size:
            banned_rows, tokens = repeated_ngram_ends(rows, self.no_repeat_ngram_size)
            if banned_rows:
                index = (torch.tensor(banned_rows, device=scores.device), torch.tensor(tokens, device=scores.device))
                scores = scores.index_put(index, torch.tensor(float("-inf"), device=scores.device))
        return scores


class CausalProcessors:
    """`LMSearch.processed` as `transformers_search` calls its processors: on rows that start with a start token
    and go on from `prompt`."""

    def __init__(self, search: LMSearch, prompt: list[int]) -> None:
        self.search, self.prompt = search, prompt

    def __call__(self, scores: Tensor, sequences: list[list[int]], cur_len: int) -> Tensor:
        return self.search.processed(scores, [self.prompt + s[1:] for s in sequences])


class CausalScorer:
    """`rows` copies of a prompt, continued one token a step (`scores`, then `advance`)."""

    def __init__(self, network: CausalLM, prompt: list[int], rows: int) -> None:
        self.network = network
        device = next(network.parameters()).device
        out = network(torch.tensor([prompt] * rows, device=device), last_logits=True)
        self.cache: list[KVCache] = out.cache
        self.logits: Tensor = out.logits[:, -1].float()
        self.pending: Tensor | None = None

    def scores(self, live: list[bool] | None = None) -> Tensor:
        """``(rows, vocab)`` float32 logits of each row's next token."""
        if self.pending is not None:
            out = self.network(self.pending, cache=self.cache, last_logits=True)
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
def beam_continuation(network: CausalLM, prompt: list[int], beam: int, max_new_tokens: int, eos_ids: list[int],
                      search: LMSearch = LMSearch()) -> Hypothesis:
    """The best continuation of `prompt` as transformers' ``generate(num_beams=beam, do_sample=False)`` finds it
    with `search`'s length penalty, early stopping, repetition penalty and n-gram ban, ending at any of `eos_ids` or
    after `max_new_tokens`."""
    settings = HFGeneration(num_beams=beam, max_length=max_new_tokens + 1, length_penalty=search.length_penalty,
                            early_stopping=search.early_stopping)
    return transformers_search(network, CausalScorer(network, prompt, beam), 1, settings, beam,  # type: ignore[arg-type]
                               settings.length_penalty, eos_ids=eos_ids,
                               processors=CausalProcessors(search, prompt))[0]  # type: ignore[arg-type]
