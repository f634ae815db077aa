"""Greedy and beam search on the fast path (no attention weights kept), batched, with a key/value cache.

Each step feeds only the newest token; the decoder's past keys/values and the projected encoder memory
come from the cache, so a step costs O(length), not a recomputation of the whole prefix.
The dispatcher: `beam_search` runs this project's rule (`viz_model.search.project_rule`) or transformers'
(`viz_model.search.transformers_rule`), each over the types of `viz_model.search.hypotheses`, which it hands on from
here.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..nn.model import EncoderOutput, Transformer
from .hypotheses import BeamCandidate, BeamStep, BeamTree, Hypothesis
from .next_token import StepScorer, TableScorer, verified_search
from .project_rule import forced, length_penalty, max_output_lengths, project_search
from .settings import HFGeneration
from .transformers_rule import transformers_search

__all__ = ["BeamCandidate", "BeamStep", "BeamTree", "Hypothesis", "beam_search", "beam_search_tree", "forced",
           "greedy_search", "length_penalty", "max_output_lengths", "output_limits"]


def output_limits(src: Tensor, model: Transformer, hf: HFGeneration | None = None) -> list[int]:
    """How many tokens the search of each source may generate: this project's rule `max_output_lengths`; with
    transformers' rule (`hf`) its max_length, the same for every sentence."""
    if hf is None:
        return max_output_lengths(src, model)
    return [hf.max_new_tokens(model.config)] * src.shape[0]


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, max_lens: list[int] | None = None) -> list[Hypothesis]:
    """Pick the most probable token at each step, for a batch of sources ``(batch, src_len)``."""
    return beam_search(model, src, beam=1, alpha=0.0, max_lens=max_lens)


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, beam: int = 4, alpha: float = 0.6,
                max_lens: list[int] | None = None, positions: bool = True,
                record: list[BeamStep] | None = None, encoded: EncoderOutput | None = None,
                hf: HFGeneration | None = None, draft: Transformer | None = None, draft_threads: int | None = None,
                step_logits: bool = False) -> list[Hypothesis]:
    """Beam search for a batch of sources; returns the best hypothesis of each sentence.

    `hf`: search by transformers' rule with these settings instead (`viz_model.search.transformers_rule`; `alpha` is
    its length_penalty, its limit its max_length, so `max_lens` must be left out); without it, this project's rule
    (GNMT's length penalty, OpenNMT's stop, see `viz_model.search.settings`). `draft`: an int8 copy of `model` that
    searches a single sentence first, so that `model` decodes the draft's prefixes in one pass and decides on those
    numbers (`viz_model.search.next_token.verified_search`: the same decisions as `model` searching alone, far fewer
    passes
    over its weights); `draft_threads`: the CPU threads the draft's own search runs on (default: the caller's);
    `step_logits`: the verified hypotheses carry the full-precision logits of their prefixes (`Hypothesis`).
    ``positions=False`` decodes without positional encodings (an experiment). `record` (one sentence only) gets
    a `BeamStep` per step; see `beam_search_tree`. `encoded`: `src` already encoded by this model's encoder with
    ``need_weights=True`` (what the search itself runs: the fused kernel's rounding differs slightly).
    """
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    batch = src.shape[0]
    if record is not None and batch != 1:
        raise ValueError(f"recording a beam search needs one sentence, got a batch of {batch}")
    if hf is not None and max_lens is not None:
        raise ValueError("transformers' rule takes its length limit from its settings (max_length): leave max_lens out")
    max_lens = max_lens or output_limits(src, model, hf)
    if len(max_lens) != batch:
        raise ValueError(f"max_lens has {len(max_lens)} entries for a batch of {batch}")
    if encoded is None:  # the instrumented attention path, as in a trace's encoder pass: a trace hands its encoding
        # to the search, and every caller (translate, trace, beam tree, ablation) gets bit-identical encodings
        encoded = model.encode(src, need_weights=True, positions=positions)
    elif encoded.hidden.shape[:2] != src.shape:
        raise ValueError(f"encoded is of a source of shape {tuple(encoded.hidden.shape[:2])}, src is "
                         f"{tuple(src.shape)}")

    def run(scorer: StepScorer | TableScorer, final: bool = True) -> list[Hypothesis]:
        steps = record if final else None
        if hf is not None:
            return transformers_search(model, scorer, batch, hf, beam, alpha, steps)
        return project_search(model, scorer, batch, beam, alpha, max_lens, steps)

    if draft is not None and batch == 1:
        return verified_search(run, model, draft, encoded, beam, positions, draft_threads=draft_threads,
                               step_logits=step_logits)[0]
    return run(StepScorer(model, encoded.repeated(beam), positions))


def beam_search_tree(model: Transformer, src: Tensor, beam: int = 4, alpha: float = 0.6, max_len: int | None = None,
                     positions: bool = True, hf: HFGeneration | None = None, draft: Transformer | None = None
                     ) -> BeamTree:
    """Beam search for one source ``(1, src_len)``, recording every step: the hypotheses extended, their best
    continuations with cumulative and length-penalised scores, and which were kept, finished or pruned.

    The search is `beam_search` itself (same code path, same result); recording costs a few list copies per step.
    With transformers' rule (`hf`) each step records the ``2 * beam`` continuations it ranks (greedy: the one it
    takes).
    """
    if src.dim() != 2 or src.shape[0] != 1:
        raise ValueError(f"beam_search_tree needs one source of shape (1, src_len), got {tuple(src.shape)}")
    if hf is not None and max_len is not None:
        raise ValueError("transformers' rule takes its length limit from its settings (max_length)")
    max_lens = [max_len] if max_len is not None else output_limits(src, model, hf)
    steps: list[BeamStep] = []
    best = beam_search(model, src, beam, alpha, None if hf else max_lens, positions=positions, record=steps, hf=hf,
                       draft=draft)[0]
    return BeamTree.recorded(steps, best, beam, alpha, max_lens[0], "project" if hf is None else "transformers")
