"""This project's search rule: GNMT's length penalty, OpenNMT's stop, a limit of source + 50 tokens.

Greedy and beam search on the fast path (no attention weights kept), batched, with a key/value cache (`scorer`).
Length penalty (Wu et al., 2016, as in the paper's setup): ``lp(Y) = ((5 + |Y|) / 6) ** alpha``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..nn.model import Transformer
from .hypotheses import BeamCandidate, BeamStep, Hypothesis
from .next_token import StepScorer, TableScorer


def length_penalty(length: int, alpha: float) -> float:
    return ((5.0 + length) / 6.0) ** alpha



def max_output_lengths(src: Tensor, model: Transformer, extra: int = 50) -> list[int]:
    """Per sentence: source length + `extra` tokens, capped so ``<s>`` + output fit in max_positions."""
    lengths = (src != model.config.pad_id).sum(dim=1).tolist()
    cap = model.config.max_positions - 1
    return [max(1, min(n + extra, cap)) for n in lengths]



def forced(log_probs: Tensor, token: int) -> Tensor:
    """Log-probabilities that leave `token` the only choice (log-probability 0, every other -inf)."""
    out = torch.full_like(log_probs, float("-inf"))
    out[..., token] = 0.0
    return out


def project_search(model: Transformer, scorer: StepScorer | TableScorer, batch: int, beam: int, alpha: float,
                   max_lens: list[int], record: list[BeamStep] | None) -> list[Hypothesis]:
    """This project's rule, for `batch` sources whose logits come from `scorer` (`batch * beam` rows, see
    `viz_model.search.next_token`); called by `viz_model.search.decoding.beam_search`.

    A hypothesis ends at ``</s>`` or at its sentence's length limit (with ``</s>`` forced there when the config's
    `eos_at_limit` says so, as Hugging Face's ``forced_eos_token_id`` does). A sentence stops (as OpenNMT does) as
    soon as the best candidate of a step ends in ``</s>``, or earlier when no hypothesis still alive can beat the
    best finished one (`_cannot_improve`, which changes no result); the result is the finished hypothesis with the
    best length-penalised score. Beam 1 is exactly greedy search. (Stopping once `beam` hypotheses have finished, as
    Hugging Face's ``early_stopping=True`` does, cuts off the longer ones: it cost the shipped model 0.7 BLEU on
    Multi30K val, with translations 6% shorter than the references.)"""
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
    """The step as `project_search` just decided it (batch of one): rows alive, their ranked continuations, fates."""
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

