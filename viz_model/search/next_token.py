"""Where a search gets the next-token logits of its rows: the decoder step by step, or a verified draft.

Both searches (`viz_model.search.decoding`, `viz_model.search.transformers_rule`) ask a scorer for the logits of their
current
rows (`scores`), then tell it how the next step's rows continue them (`advance`: row i of the next step is row
``parents[i]`` of this one plus ``tokens[i]``). Which network computes the numbers is the scorer's business:

- `StepScorer`: the decoder, one token per row and step, with its key/value cache (what a search always did);
- `verified_search`: full-precision decisions at about the cost of an int8 search. At opus-mt size a step of the
  full-precision search streams ~200 MB of weights for four rows, so a 22-step search is bound by memory bandwidth.
  Instead an int8 copy searches first (a draft); every prefix the draft scored is then decoded by the
  full-precision network in one pass over the draft's tree of prefixes (each node at its depth, attending to its
  ancestors only: the weights are read once, not once per step); and the search runs again on those numbers
  (`TableScorer`). Where the full-precision search asks for a prefix the draft never scored, the draft takes over
  from there and the next round verifies the larger tree, until a round's search finds every prefix it asks for.
  So every decision is the full-precision network's: the same output as the plain full-precision search, up to
  float32 rounding of the sums.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from ..config import ModelConfig
from ..nn.devices import threads
from ..nn.model import EncoderOutput, LayerCache, Transformer
from .hypotheses import Hypothesis

MAX_ROUNDS = 6  # draft-and-verify rounds before a search falls back to the full-precision decoder step by step
DRAFT_MIN_PARAMETERS = 16_000_000  # a decoding step's weights (decoder + output projection) worth drafting: 64 MB


def draft_pays(config: ModelConfig) -> bool:
    """Whether a decoding step reads more weights than a CPU's caches hold (an opus-mt-size model: ~50M parameters,
    200 MB), so that an int8 draft verified in one pass beats the full-precision search step by step. Below that
    (this project's 10M-parameter models) the plain search is faster: measured in `benchmarks/bench_peers.py`."""
    d = config.d_model
    per_layer = 4 * d * d + 2 * d * d + 2 * d * config.d_ff  # self-attention, cross-attention's Q and O, the FFN
    return config.decoder_layers * per_layer + config.vocab_size * d >= DRAFT_MIN_PARAMETERS


class StepScorer:
    """The decoder one step at a time, its key/value cache reordered as the rows move (the plain search).

    `encoded` has one row per search row (a source repeated `beam` times). With `record`, the prefixes of the live
    rows it scored are collected in `scored` (a draft)."""

    def __init__(self, model: Transformer, encoded: EncoderOutput, positions: bool = True, record: bool = False,
                 start: tuple[Tensor, list[LayerCache], list[tuple[int, ...]]] | None = None) -> None:
        self.model, self.encoded, self.positions = model, encoded, positions
        rows = encoded.hidden.shape[0]
        if start is None:  # the first step: every row reads the start token
            self.prefixes: list[tuple[int, ...]] = [()] * rows
            self.pending: Tensor | None = torch.full((rows, 1), model.config.bos_id, dtype=torch.long,
                                                     device=encoded.hidden.device)
            self.cache: list[LayerCache] | None = None
            self.logits: Tensor | None = None
        else:  # rows already decoded up to their prefixes (see `from_prefixes`)
            self.logits, self.cache, self.prefixes = start
            self.pending = None
        self.scored: set[tuple[int, ...]] | None = set() if record else None

    @classmethod
    def from_prefixes(cls, model: Transformer, encoded: EncoderOutput, prefixes: list[tuple[int, ...]],
                      positions: bool = True, record: bool = False) -> StepScorer:
        """A scorer whose rows already read ``<s>`` + `prefixes` (all of one length): one teacher-forced pass
        builds their cache and their next-token logits."""
        tokens = torch.tensor([[model.config.bos_id, *p] for p in prefixes], device=encoded.hidden.device)
        out = model.decode(tokens, encoded, positions=positions)
        logits = model.logits(out.hidden[:, -1], mask_never_emitted=False).float()
        return cls(model, encoded, positions, record, start=(logits, out.cache, list(prefixes)))

    @property
    def step(self) -> int:
        return len(self.prefixes[0])

    def scores(self, live: list[bool] | None = None) -> Tensor:
        """``(rows, vocab)`` float32 logits of each row's next token (no id masked: a search bans its own)."""
        if self.pending is not None:
            out = self.model.decode(self.pending, self.encoded, cache=self.cache, offset=self.step,
                                    positions=self.positions)
            self.logits = self.model.logits(out.hidden[:, -1], mask_never_emitted=False).float()
            self.cache, self.pending = out.cache, None
        if self.scored is not None:
            self.scored.update(p for p, alive in zip(self.prefixes, live or [True] * len(self.prefixes)) if alive)
        assert self.logits is not None
        return self.logits

    def advance(self, parents: list[int], tokens: list[int]) -> None:
        """Row i of the next step continues row ``parents[i]`` with ``tokens[i]``."""
        device = self.encoded.hidden.device
        if parents != list(range(len(self.prefixes))):
            index = torch.tensor(parents, device=device)
            self.cache = [layer.reorder(index, same_source=True) for layer in self.cache or []]
        self.prefixes = [self.prefixes[p] + (t,) for p, t in zip(parents, tokens)]
        self.pending = torch.tensor(tokens, device=device).view(-1, 1)


class TableScorer:
    """Logits looked up by prefix in a table (the full-precision numbers of a draft's tree of prefixes). From the first
    live row whose prefix the table lacks on, `fallback` (a `StepScorer` built from the rows' prefixes, e.g. of
    the draft network, recording) answers instead (`delegate`): the run's decisions are then not all the table's."""

    def __init__(self, table: dict[tuple[int, ...], int], logits: Tensor, rows: int,
                 fallback: Callable[[list[tuple[int, ...]]], StepScorer]) -> None:
        self.table, self.logits, self.fallback = table, logits, fallback
        self.prefixes: list[tuple[int, ...]] = [()] * rows
        self.delegate: StepScorer | None = None

    def scores(self, live: list[bool] | None = None) -> Tensor:
        if self.delegate is None:
            live = live or [True] * len(self.prefixes)
            if all(p in self.table for p, alive in zip(self.prefixes, live) if alive):
                # a dead row's numbers are never used by the search (its score is -inf or -1e9): any row will do
                return self.logits[[self.table.get(p, 0) for p in self.prefixes]]
            self.delegate = self.fallback(self.prefixes)
        return self.delegate.scores(live)

    def advance(self, parents: list[int], tokens: list[int]) -> None:
        if self.delegate is not None:
            self.delegate.advance(parents, tokens)
        else:
            self.prefixes = [self.prefixes[p] + (t,) for p, t in zip(parents, tokens)]


class PrefixTree:
    """The full-precision next-token logits after every prefix of a growing set, each computed once.

    `extend` decodes the new prefixes (and the prefixes of theirs not yet in the tree) in one pass over the tree:
    each node reads its last token at its depth and attends to its ancestors only, whose keys and values earlier
    passes left in the cache. `encoded` is the one source, ``(1, src_len, d_model)``."""

    def __init__(self, model: Transformer, encoded: EncoderOutput, positions: bool = True) -> None:
        self.model, self.encoded, self.positions = model, encoded, positions
        self.index: dict[tuple[int, ...], int] = {}  # prefix -> its row of `logits`; parents before children
        self.logits = torch.empty(0)
        self.cache: list[LayerCache] | None = None

    def extend(self, prefixes: set[tuple[int, ...]]) -> None:
        new = sorted({p[:i] for p in prefixes for i in range(len(p) + 1)} - self.index.keys(),
                     key=lambda p: (len(p), p))
        if not new:
            return
        old, device = len(self.index), self.encoded.hidden.device
        self.index.update((p, old + i) for i, p in enumerate(new))
        tokens = torch.tensor([[p[-1] if p else self.model.config.bos_id for p in new]], device=device)
        depth = torch.tensor([[len(p) for p in new]], device=device)
        ancestors = torch.zeros(len(new), old + len(new), dtype=torch.bool, device=device)
        for i, p in enumerate(new):
            ancestors[i, [self.index[p[:k]] for k in range(len(p) + 1)]] = True
        out = self.model.decode(tokens, self.encoded, cache=self.cache, offset=old, tgt_mask=ancestors[None, None],
                                position_ids=depth, positions=self.positions)
        logits = self.model.logits(out.hidden[0], mask_never_emitted=False).float()
        self.logits = logits if old == 0 else torch.cat([self.logits, logits])
        self.cache = out.cache


def verified_search(run: Callable[..., list[Hypothesis]], model: Transformer, draft: Transformer,
                    encoded: EncoderOutput, beam: int, positions: bool = True, rounds: int = MAX_ROUNDS,
                    draft_threads: int | None = None, step_logits: bool = False) -> tuple[list[Hypothesis], int]:
    """`run(scorer, final)` (one search of one sentence; `final` False for the draft's run) with every decision the
    full-precision `model`'s, `encoded` being the sentence ``(1, src_len, d_model)``.

    The `draft` (int8) searches first; the full-precision model decodes every prefix it scored in one pass over their
    tree; the search runs again on those numbers. Where it asks for a prefix the tree lacks (full precision chose
    another beam than the draft did), the draft takes over from there and the round ends with more prefixes for
    the tree; the round whose search found every prefix in the tree is the answer. After `rounds` rounds the
    full-precision model searches step by step. Returns the result and the number of rounds. The draft's first search
    runs on `draft_threads` CPU threads (default: the caller's): its numbers only choose which prefixes are verified.
    With `step_logits`, each hypothesis a verified round found carries the tree's logits of its prefixes
    (`Hypothesis.step_logits`), which a caller's teacher-forced pass over it need not project again.
    """
    rows = encoded.repeated(beam)
    drafting = StepScorer(draft, rows, positions, record=True)
    with threads(draft_threads or torch.get_num_threads()):
        run(drafting, False)
    tree = PrefixTree(model, encoded, positions)
    scored = drafting.scored or set()
    for round_ in range(1, rounds + 1):
        tree.extend(scored)
        scorer = TableScorer(tree.index, tree.logits, beam, partial(StepScorer.from_prefixes, draft, rows,
                                                                    positions=positions, record=True))
        result = run(scorer, True)
        if scorer.delegate is None:
            for hypothesis in result if step_logits else []:
                prefixes = [tuple(hypothesis.tokens[:k]) for k in range(len(hypothesis.tokens))]
                if all(p in tree.index for p in prefixes):  # each was a live row the table answered
                    hypothesis.step_logits = tree.logits[[tree.index[p] for p in prefixes]]
            return result, round_
        scored = scorer.delegate.scored or set()
    return run(StepScorer(model, rows, positions), True), rounds + 1
