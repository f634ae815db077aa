"""Searching a decoder-only language model's continuation: its rows scored one step at a time from a prompt, with
the key/value cache reordered as the rows move (what transformers' beam search, `transformers_search`, asks of a
scorer), under the search settings of the model's generation config (`LMSearch`); its greedy continuation drafted by
an int8 copy and verified by the full-precision network (`verified_greedy`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..nn.attention import KVCache
from ..nn.causal_lm import CausalLM, CausalLMOutput
from ..nn.experts import ExpertRouting
from ..nn.score_recipe import first_rows, queries_only
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


DRAFT_TOKENS = 4  # a round's first draft length; +2 after a round the network accepts whole, -1 after one it cuts
MAX_DRAFT_TOKENS = 16
MIN_AGREEMENT = 0.6  # below this share of agreeing next tokens (once DRAFT_SAMPLE are drafted) a draft costs more
DRAFT_SAMPLE = 8  # than it saves; judged on 8 drafted tokens, not on the first round's luck (issue 62)
Choice = Callable[[Tensor, list[int]], int]
"""The id chosen from ``(1, vocab)`` logits after the ids so far (the search settings applied, then argmax)."""


@dataclass
class Verified:
    """A greedy continuation the full-precision network decided on a draft's tokens.

    :ivar tokens: the new ids (an end-of-text id that stopped it included)
    :ivar calls: with ``record``, each full-precision call's output cut to the rows kept (maps, logits, cache)
    :ivar drafted: the tokens the draft proposed
    :ivar accepted: those the network chose too
    :ivar rounds: the full-precision calls
    :ivar cuts: the calls that cut a proposal short (a disagreement)
    """

    tokens: list[int] = field(default_factory=list)
    calls: list[CausalLMOutput] = field(default_factory=list)
    drafted: int = 0
    accepted: int = 0
    rounds: int = 0
    cuts: int = 0


def kept_rows(out: CausalLMOutput, offset: int, rows: int) -> CausalLMOutput:
    """`out` of a call that ran after `offset` cached tokens, cut to its first `rows` rows: their logits and maps or
    recipes (keys up to the last row kept) and the cache up to them. Rows never see later keys, so they are what a
    call over those rows alone computes."""
    keys = offset + rows
    return CausalLMOutput(out.logits[:, :rows], cache=cut_cache(out.cache, keys) or [],
                          mask=None if out.mask is None else out.mask[..., :rows, :keys],
                          maps=[m[:, :, :rows, :keys] for m in out.maps],
                          recipes=[first_rows(r, rows, keys) for r in out.recipes], sinks=out.sinks,
                          routing=[ExpertRouting(r.experts[:, :rows], r.weights[:, :rows]) for r in out.routing])


def add_call(calls: list[CausalLMOutput], out: CausalLMOutput) -> None:
    """Append a cached call's `out` to the recorded `calls`: its cache and recipes hold every key so far, so the call
    before it lets go of its cache and its recipes' keys (`merged` reads the last call's)."""
    if calls:
        calls[-1].cache, calls[-1].recipes = [], [queries_only(r) for r in calls[-1].recipes]
    calls.append(out)


def cut_cache(cache: list[KVCache] | None, keys: int) -> list[KVCache] | None:
    """`cache` up to its first `keys` tokens (views)."""
    if not cache or cache[0].key.shape[2] <= keys:
        return cache
    return [KVCache(kv.key[:, :, :keys], kv.value[:, :, :keys],
                    None if kv.positions is None else kv.positions[:, :keys]) for kv in cache]


@torch.inference_mode()
def verified_greedy(network: CausalLM, draft: CausalLM, ids: list[int], max_new_tokens: int, choose: Choice,
                    eos_ids: list[int], record: bool = False, head_mask: Tensor | None = None,
                    maps_block: Callable[[int], list[Tensor] | None] | None = None, weights: str = "maps"
                    ) -> Verified:
    """`network`'s greedy continuation of `ids` with fewer full-precision weight reads: `draft` (an int8 copy) proposes
    a few tokens, one `network` call runs them all (with `record`, its maps) and keeps the longest prefix on which its
    own `choose` agrees, then its own token at the first disagreement (or after the last); drafting goes on from
    there; where it agrees on less than `MIN_AGREEMENT` of its tokens, `network` decodes alone from there. Each token
    is `network`'s choice on its own logits; with `record` every token is run (the last too), the
    first call's maps into ``maps_block(rows)`` where given (see `CausalLM.forward`'s `maps_into`);
    ``weights="recipe"``: each call records its layers' recipes in place of maps."""
    device = next(network.parameters()).device
    found, seq = Verified(), list(ids)
    cache: list[KVCache] | None = None
    drafts: list[KVCache] | None = None
    ran = drafted_ran = 0  # the tokens of seq in `cache`, in `drafts`
    length, done = DRAFT_TOKENS, max_new_tokens == 0
    while not (done and (not record or ran == len(seq))):
        proposal: list[int] = []
        while not done and len(proposal) < min(length, max_new_tokens - len(found.tokens)):
            step = (seq + proposal)[drafted_ran:]
            out = draft(torch.tensor([step], device=device), cache=drafts, head_mask=head_mask, last_logits=True)
            drafts, drafted_ran = out.cache, drafted_ran + len(step)
            proposal.append(choose(out.logits[:, -1], seq + proposal))
            if proposal[-1] in eos_ids:
                break
        pending = len(seq) - ran
        out = network(torch.tensor([seq[ran:] + proposal], device=device), need_weights=weights if record else False,
                      cache=cache, head_mask=head_mask, maps_into=maps_block(len(seq) + len(proposal))
                      if maps_block and weights == "maps" and cache is None else None)
        accepted = 0
        for j in range(len(proposal) + 1 if not done else 0):
            token = choose(out.logits[:, pending - 1 + j].float(), seq)
            seq.append(token)
            found.tokens.append(token)
            done = len(found.tokens) == max_new_tokens or token in eos_ids
            if j == len(proposal) or token != proposal[j]:
                break
            accepted += 1
            if done:
                break
        out = kept_rows(out, ran, pending + accepted)
        if record:
            add_call(found.calls, out)
        cache, ran = out.cache, ran + pending + accepted
        drafted_ran = min(drafted_ran, len(seq) - 1)
        drafts = cut_cache(drafts, drafted_ran)
        found.drafted, found.accepted, found.rounds = found.drafted + len(proposal), found.accepted + accepted, \
            found.rounds + 1
        found.cuts += accepted < len(proposal)
        length = next_length(found, length, accepted, len(proposal))
    return found


def next_length(found: Verified, length: int, accepted: int, proposed: int) -> int:
    """The next round's draft length after a round that accepted `accepted` of `proposed` tokens: +2 after a whole
    proposal (at most `MAX_DRAFT_TOKENS`), -1 after a cut (at least 1); 0 from the round where, `DRAFT_SAMPLE` tokens
    drafted, less than `MIN_AGREEMENT` of the drafting rounds' decisions agreed (it stays 0: no more drafting)."""
    if found.drafted >= DRAFT_SAMPLE and found.accepted < MIN_AGREEMENT * (found.accepted + found.cuts):
        return 0
    if not length:
        return 0
    return min(length + 2, MAX_DRAFT_TOKENS) if accepted == proposed else max(1, length - 1)
