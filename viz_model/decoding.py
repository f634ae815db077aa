"""Greedy and beam search on the fast path (no attention weights kept), batched, with a key/value cache.

Each step feeds only the newest token; the decoder's past keys/values and the projected encoder memory
come from the cache, so a step costs O(length), not a recomputation of the whole prefix.
Length penalty (Wu et al., 2016, as in the paper's setup): ``lp(Y) = ((5 + |Y|) / 6) ** alpha``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .generation import HFGeneration
from .model import EncoderOutput, Transformer
from .scorers import StepScorer, TableScorer, verified_search


@dataclass
class Hypothesis:
    """One finished output: generated ids (ending in ``</s>`` unless cut at the length limit)."""

    tokens: list[int]
    log_prob: float  # sum of log-probabilities of `tokens`
    score: float  # log_prob / length penalty: what beam search ranks by


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class BeamCandidate:
    """One continuation looked at in a step of beam search: hypothesis `parent` of the step + `token`."""

    parent: int  # index into the step's `alive` list
    token: int
    log_prob: float  # cumulative log-probability of the prefix + token
    score: float  # log_prob / length_penalty(step + 1, alpha): what the search ranks finished hypotheses by
    status: str  # "kept" (goes on as a row of the next step), "finished" (ended: </s> or length limit), "pruned"
    row: int | None = None  # its row in the next step's `alive` list when kept


@dataclass
class BeamStep:
    """What one step of beam search for one sentence saw: the hypotheses it extended and their best continuations."""

    step: int
    alive: list[list[int]]  # the prefixes (generated ids, without <s>) extended at this step, by row
    alive_log_probs: list[float]
    candidates: list[BeamCandidate]  # per alive row its best 2*beam continuations (the ones the search ranks)
    stopped: bool = False  # the search ended after this step (best candidate ended, or enough finished)


@dataclass
class BeamTree:
    """A recorded beam search for one sentence; `best` is exactly what `beam_search` returns for it."""

    beam: int
    alpha: float
    steps: list[BeamStep]
    finished: list[Hypothesis]
    best: Hypothesis
    max_len: int = 0
    chosen_path: list[tuple[int, int]] = field(default_factory=list)  # (step, candidate index) of the best's tokens
    rule: str = "project"  # "project" (score = log p / ((5 + |Y|) / 6)^alpha) or "transformers" (log p / |Y|^alpha)


def max_output_lengths(src: Tensor, model: Transformer, extra: int = 50) -> list[int]:
    """Per sentence: source length + `extra` tokens, capped so ``<s>`` + output fit in max_positions."""
    lengths = (src != model.config.pad_id).sum(dim=1).tolist()
    cap = model.config.max_positions - 1
    return [max(1, min(n + extra, cap)) for n in lengths]


def output_limits(src: Tensor, model: Transformer, hf: HFGeneration | None = None) -> list[int]:
    """How many tokens the search of each source may generate: this project's rule `max_output_lengths`; with
    transformers' rule (`hf`) its max_length, the same for every sentence."""
    if hf is None:
        return max_output_lengths(src, model)
    return [hf.max_new_tokens(model.config)] * src.shape[0]


def forced(log_probs: Tensor, token: int) -> Tensor:
    """Log-probabilities that leave `token` the only choice (log-probability 0, every other -inf)."""
    out = torch.full_like(log_probs, float("-inf"))
    out[..., token] = 0.0
    return out


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, max_lens: list[int] | None = None) -> list[Hypothesis]:
    """Pick the most probable token at each step, for a batch of sources ``(batch, src_len)``."""
    return beam_search(model, src, beam=1, alpha=0.0, max_lens=max_lens)


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, beam: int = 4, alpha: float = 0.6,
                max_lens: list[int] | None = None, positions: bool = True,
                record: list[BeamStep] | None = None, encoded: EncoderOutput | None = None,
                hf: HFGeneration | None = None, draft: Transformer | None = None) -> list[Hypothesis]:
    """Beam search for a batch of sources; returns the best hypothesis of each sentence.

    `hf`: search by transformers' rule with these settings instead (`viz_model.transformers_search`; `alpha` is
    its length_penalty, its limit its max_length, so `max_lens` must be left out); without it, this project's rule
    (GNMT's length penalty, OpenNMT's stop, see `viz_model.generation`). `draft`: an int8 copy of `model` that
    searches a single sentence first, so that `model` decodes the draft's prefixes in one pass and decides on those
    numbers (`viz_model.scorers.verified_search`: the same decisions as `model` searching alone, far fewer passes
    over its weights).
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
            from .transformers_search import transformers_search

            return transformers_search(model, scorer, batch, hf, beam, alpha, steps)
        return _project_search(model, scorer, batch, beam, alpha, max_lens, steps)

    if draft is not None and batch == 1:
        return verified_search(run, model, draft, encoded, beam, positions)[0]
    return run(StepScorer(model, encoded.repeated(beam), positions))


def _project_search(model: Transformer, scorer: StepScorer | TableScorer, batch: int, beam: int, alpha: float,
                    max_lens: list[int], record: list[BeamStep] | None) -> list[Hypothesis]:
    """This project's rule. A hypothesis ends at ``</s>`` or at its sentence's length limit (with ``</s>`` forced
    there when the config's `eos_at_limit` says so, as Hugging Face's ``forced_eos_token_id`` does). A sentence stops
    (as OpenNMT does) as soon as the best candidate of a step ends in ``</s>``, or earlier when no hypothesis still
    alive can beat the best finished one (`_cannot_improve`, which changes no result); the result is the finished
    hypothesis with the best length-penalised score. Beam 1 is exactly greedy search. (Stopping once `beam`
    hypotheses have finished, as Hugging Face's ``early_stopping=True`` does, cuts off the longer ones: it cost the
    shipped model 0.7 BLEU on Multi30K val, with translations 6% shorter than the references.)"""
    cfg = model.config
    device = next(model.parameters()).device
    eos, pad, rows_total = cfg.eos_id, cfg.pad_id, batch * beam
    never = torch.tensor(cfg.never_emitted, dtype=torch.long, device=device) if cfg.never_emitted else None
    prefixes: list[list[int]] = [[] for _ in range(rows_total)]  # per row: the ids generated so far (no <s>)
    scores = torch.full((batch, beam), float("-inf"), device=device)
    scores[:, 0] = 0.0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    done = [False] * batch
    for step in range(max(max_lens)):
        logits = scorer.scores((scores.view(-1) > float("-inf")).tolist())
        if never is not None:  # the ids the model never outputs (a Marian model's pad)
            logits = logits.index_fill(-1, never, float("-inf"))
        log_probs = torch.log_softmax(logits, dim=-1)
        if step == 0 and cfg.forced_first_id is not None:  # M2M100's target language code, as Hugging
            log_probs = forced(log_probs, cfg.forced_first_id)  # Face forces it: the only choice, score 0
        if cfg.eos_at_limit:  # the last token the limit allows is </s> (Hugging Face's forced_eos_token_id)
            ending = [b * beam + r for b in range(batch) if step + 1 == max_lens[b] for r in range(beam)]
            if ending:
                rows_ending = torch.tensor(ending, device=device)
                log_probs[rows_ending] = forced(log_probs[rows_ending], eos)
        vocab = log_probs.shape[-1]
        width = min(2 * beam, vocab)
        # the best `width` of each row first (adding the row's score keeps their order), then the best `width` of
        # the sentence among those (cheaper than one top-k over beam * vocab scores, same candidates); a stable sort,
        # so scores that rounding made equal keep row order, and within a row the log-probabilities' order
        row_best, row_tokens = log_probs.topk(width, dim=-1)
        row_scores = scores.view(-1, 1) + row_best
        top_scores, top_pos = row_scores.view(batch, beam * width).sort(dim=1, descending=True, stable=True)
        top_scores, top_pos = top_scores[:, :width], top_pos[:, :width]
        top_index = (top_pos // width) * vocab + row_tokens.view(batch, beam * width).gather(1, top_pos)
        top_scores_l, top_index_l = top_scores.tolist(), top_index.tolist()
        # the next step's rows, as plain lists (one tensor each per step, not one write per hypothesis)
        rows, next_tokens = list(range(rows_total)), [pad] * rows_total
        next_scores = [float("-inf")] * rows_total
        for b in range(batch):
            if done[b]:
                continue
            last_step = step + 1 >= max_lens[b]
            kept, best_alive = 0, float("-inf")  # the candidates come best first: the first one kept is the best
            best_ends = top_index_l[b][0] % vocab == eos
            for s, index in zip(top_scores_l[b], top_index_l[b]):
                if s == float("-inf"):
                    break
                source_row, token = b * beam + index // vocab, index % vocab
                if token == eos or last_step:
                    seq = prefixes[source_row] + [token]
                    finished[b].append(Hypothesis(seq, s, s / length_penalty(len(seq), alpha)))
                else:
                    row = b * beam + kept
                    rows[row], next_tokens[row], next_scores[row] = source_row, token, s
                    best_alive = max(best_alive, s)
                    kept += 1
                if kept == beam:
                    break
            if best_ends or last_step or kept == 0 or _cannot_improve(finished[b], best_alive, max_lens[b], alpha):
                done[b] = True
                next_scores[b * beam:(b + 1) * beam] = [float("-inf")] * beam
            if record is not None:
                kept_rows = slice(b * beam, b * beam + kept)
                record.append(_record_step(step, prefixes, scores[b], row_scores, row_tokens, rows[kept_rows],
                                           next_tokens[kept_rows], finished[b], alpha, done[b]))
        if all(done):
            break
        prefixes = [prefixes[r] + [t] for r, t in zip(rows, next_tokens)]
        scorer.advance(rows, next_tokens)
        scores = torch.tensor(next_scores, device=device).view(batch, beam)
    return [max(hyps, key=lambda h: h.score) for hyps in finished]


def _cannot_improve(finished: list[Hypothesis], best_alive: float, max_len: int, alpha: float) -> bool:
    """Whether no hypothesis alive (the best at log-prob `best_alive`) can end with a better length-penalised score
    than the best finished one: log-probs only fall as it grows, and its penalty is at most that of `max_len` (for
    alpha >= 0; a negative alpha never stops early)."""
    if not finished or alpha < 0:
        return False
    return best_alive / length_penalty(max_len, alpha) <= max(h.score for h in finished)


def _record_step(step: int, prefixes: list[list[int]], scores: Tensor, row_scores: Tensor, row_tokens: Tensor,
                 kept_rows: list[int], kept_tokens: list[int], finished: list[Hypothesis], alpha: float,
                 stopped: bool) -> BeamStep:
    """The step as `beam_search` just decided it (batch of one): rows alive, their ranked continuations, fates."""
    live = [r for r, s in enumerate(scores.tolist()) if s != float("-inf")]
    kept = {(r, t): i for i, (r, t) in enumerate(zip(kept_rows, kept_tokens))}
    ended = {tuple(h.tokens) for h in finished if len(h.tokens) == step + 1}
    lp = length_penalty(step + 1, alpha)
    candidates = []
    for parent, r in enumerate(live):
        for s, t in zip(row_scores[r].tolist(), row_tokens[r].tolist()):
            if s == float("-inf"):
                continue
            row = kept.get((r, t))
            if row is not None and not stopped:
                status = "kept"
            elif tuple(prefixes[r] + [t]) in ended:
                status = "finished"
            else:
                status, row = "pruned", None
            candidates.append(BeamCandidate(parent, t, s, s / lp, status, row))
    return BeamStep(step, [prefixes[r] for r in live], [scores[r].item() for r in live], candidates, stopped)


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
    finished = [Hypothesis(prefix + [c.token], c.log_prob, c.score)
                for s in steps for c in s.candidates if c.status == "finished"
                for prefix in [s.alive[c.parent]]]
    tree = BeamTree(beam, alpha, steps, finished, best, max_lens[0], rule="project" if hf is None else "transformers")
    # the best hypothesis' path: at step t the candidate extending best.tokens[:t] with best.tokens[t]
    for t, s in enumerate(steps[:len(best.tokens)]):
        for i, c in enumerate(s.candidates):
            if s.alive[c.parent] == best.tokens[:t] and c.token == best.tokens[t]:
                tree.chosen_path.append((t, i))
                break
    return tree
