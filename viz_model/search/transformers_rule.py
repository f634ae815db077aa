"""transformers 5's beam search and greedy search, on this project's network: ``generate()``'s translation.

A port of ``GenerationMixin._beam_search`` (and, for one beam, of its greedy search) of transformers 5: the same
tensor operations in the same order (log-softmax, then the logits processors its generation config asks for, the
top ``2 * beam`` continuations over every beam, finished hypotheses scored ``log p / |Y| ** length_penalty``
and merged into a list of ``beam``, the ``-1e9`` masks, its ``early_stopping`` rules True / False / "never" and
its length limit), so that an imported model translates as transformers translates it (tested on trained
weights against ``generate``). The decoder runs with this project's key/value cache; the network is this project's
(fp32, or the int8 search copy when asked for, which can change the output).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..nn.model import Transformer
from .hypotheses import BeamCandidate, BeamStep, Hypothesis
from .next_token import StepScorer, TableScorer
from .settings import HFGeneration

NEG = -1.0e9  # transformers' "very large negative value" (not -inf: it keeps arithmetic on masked beams finite)


class Processors:
    """transformers' logits processors for `hf`, in its order: no-repeat n-grams, bad words, minimum length, forced
    first token, forced ``</s>`` at the limit, suppressed tokens, renormalisation."""

    def __init__(self, hf: HFGeneration, model: Transformer, max_new: int, device: torch.device) -> None:
        cfg = model.config
        self.hf, self.eos = hf, cfg.eos_id
        self.max_length = max_new + 1  # transformers counts the start token
        # an M2M100 model's target language is its forced first token (transformers' forced_bos_token_id)
        self.forced_bos = cfg.forced_first_id if cfg.forced_first_id is not None else hf.forced_bos_token_id
        single = sorted({seq[0] for seq in hf.bad_words_ids if len(seq) == 1})
        self.banned = torch.tensor(single + list(hf.suppress_tokens), dtype=torch.long, device=device)
        self.longer_bad_words = [seq for seq in hf.bad_words_ids if len(seq) > 1]

    def __call__(self, scores: Tensor, sequences: list[list[int]], cur_len: int) -> Tensor:
        """`scores` ``(rows, vocab)`` of the rows whose `sequences` (start token included) are `cur_len` long."""
        n = self.hf.no_repeat_ngram_size
        if n and cur_len >= n:
            rows, tokens = repeated_ngram_ends(sequences, n)
            if rows:
                index = (torch.tensor(rows, device=scores.device), torch.tensor(tokens, device=scores.device))
                scores = scores.index_put(index, torch.tensor(float("-inf"), device=scores.device))
        if self.banned.numel():
            scores = scores.index_fill(-1, self.banned, float("-inf"))
        for seq in self.longer_bad_words:
            rows = [r for r, s in enumerate(sequences) if len(seq) - 1 <= len(s) and s[len(s) - len(seq) + 1:] ==
                    list(seq[:-1])]
            if rows:
                scores = scores.clone()
                scores[rows, seq[-1]] = float("-inf")
        if cur_len < self.hf.min_length:
            scores = scores.clone()
            scores[:, self.eos] = float("-inf")
        if cur_len == 1 and self.forced_bos is not None:
            scores = _forced(scores, self.forced_bos)
        if self.hf.forced_eos and cur_len == self.max_length - 1:
            scores = _forced(scores, self.eos)
        if self.hf.renormalize_logits:
            scores = scores.log_softmax(dim=-1)
        return scores


def _forced(scores: Tensor, token: int) -> Tensor:
    out = torch.full_like(scores, float("-inf"))
    out[:, token] = 0
    return out


def repeated_ngram_ends(sequences: list[list[int]], n: int) -> tuple[list[int], list[int]]:
    """Per row, the tokens that would repeat an n-gram of the sequence (transformers' no_repeat_ngram_size)."""
    rows, tokens = [], []
    for r, seq in enumerate(sequences):
        prefix = seq[len(seq) + 1 - n:] if n > 1 else []
        for i in range(len(seq) - n + 1):
            if seq[i:i + n - 1] == prefix:
                rows.append(r)
                tokens.append(seq[i + n - 1])
    return rows, tokens


@torch.inference_mode()
def transformers_search(model: Transformer, scorer: StepScorer | TableScorer, batch: int, hf: HFGeneration,
                        beam: int, alpha: float, record: list[BeamStep] | None = None,
                        eos_ids: list[int] | None = None, processors: Processors | None = None) -> list[Hypothesis]:
    """The best hypothesis of each of `batch` sources as transformers' ``generate`` finds it: greedy search for
    one beam, its beam search otherwise, with `hf`'s settings and `alpha` as its length_penalty; the logits come
    from `scorer` (`batch * beam` rows, see `viz_model.search.next_token`). `record` (one sentence) gets a `BeamStep`
    per
    step; `eos_ids`: the ids that end an output (default the config's ``eos_id``; a language model may have several);
    `processors`: what edits each step's scores (default: `hf`'s `Processors`). Called by
    `viz_model.search.decoding.beam_search`."""
    max_new = hf.max_new_tokens(model.config)
    processors = processors or Processors(hf, model, max_new, next(model.parameters()).device)
    ends = [model.config.eos_id] if eos_ids is None else list(eos_ids)
    if beam == 1:
        return _greedy(model, scorer, batch, processors, max_new, alpha, record, ends)
    return _beam(model, scorer, batch, processors, max_new, beam, alpha, hf.early_stopping, record, ends)


def _greedy(model: Transformer, scorer: StepScorer | TableScorer, batch: int, processors: Processors, max_new: int,
            alpha: float, record: list[BeamStep] | None, ends: list[int]) -> list[Hypothesis]:
    """transformers' greedy search: the arg-max of the processed logits until an id of `ends` or the limit."""
    cfg = model.config
    sequences = [[cfg.bos_id] for _ in range(batch)]
    log_probs = [0.0] * batch
    done = [False] * batch
    for step in range(max_new):
        logits = scorer.scores([not d for d in done])
        chosen = processors(logits, sequences, step + 1).argmax(dim=-1)
        chosen_log_probs = processors(logits.log_softmax(dim=-1), sequences, step + 1).gather(1, chosen[:, None])
        tokens = chosen.tolist()
        for b, (token, lp) in enumerate(zip(tokens, chosen_log_probs[:, 0].tolist())):
            if done[b]:
                continue
            before = log_probs[b]
            sequences[b].append(token)
            log_probs[b] += lp
            done[b] = token in ends or step + 1 == max_new
            if record is not None:  # one row, one continuation a step
                ended = done[b]
                candidate = BeamCandidate(0, token, log_probs[b], log_probs[b] / (step + 1) ** alpha,
                                          "finished" if ended else "kept", None if ended else 0)
                record.append(BeamStep(step, [sequences[b][1:-1]], [before], [candidate], stopped=ended))
        if all(done):
            break
        scorer.advance(list(range(batch)), tokens)
    return [Hypothesis(s[1:], lp, lp / (len(s) - 1) ** alpha) for s, lp in zip(sequences, log_probs)]


def _beam(model: Transformer, scorer: StepScorer | TableScorer, batch: int, processors: Processors, max_new: int,
          beam: int, alpha: float, early_stopping: bool | str, record: list[BeamStep] | None,
          ends: list[int]) -> list[Hypothesis]:
    """transformers' beam search (``_beam_search``), a batch of sentences at once; an output ends at an id of
    `ends`."""
    cfg = model.config
    device = next(model.parameters()).device
    max_length = max_new + 1
    keep = max(2, 1 + len(ends)) * beam  # as transformers: room for each end id beside a continuation
    end_ids = torch.tensor(ends, dtype=torch.long, device=device)
    top_beams = torch.arange(keep, device=device) < beam
    running_scores = torch.zeros((batch, beam), dtype=torch.float, device=device)
    running_scores[:, 1:] = NEG
    finished_scores = torch.full((batch, beam), NEG, dtype=torch.float, device=device)
    is_finished = torch.zeros((batch, beam), dtype=torch.bool, device=device)
    unsatisfied = torch.ones((batch, 1), dtype=torch.bool, device=device)
    running: list[list[int]] = [[] for _ in range(batch * beam)]  # generated ids of each row (no start token)
    placeholder = Hypothesis([cfg.eos_id], float("-inf"), NEG)  # a slot no finished hypothesis has filled
    finished: list[list[Hypothesis]] = [[placeholder] * beam for _ in range(batch)]
    cur_len = 1
    while True:
        logits = scorer.scores((running_scores.view(-1) > NEG / 2).tolist())
        vocab = logits.shape[-1]
        log_probs = processors(logits.log_softmax(dim=-1), [[cfg.bos_id, *r] for r in running], cur_len)
        log_probs = (log_probs.view(batch, beam, vocab) + running_scores[:, :, None]).reshape(batch, -1)
        top_log_probs, top_index = torch.topk(log_probs, k=keep)
        parents, tokens = top_index // vocab, top_index % vocab
        hits = torch.isin(tokens, end_ids) | (cur_len + 1 >= max_length)
        # the best `beam` continuations that did not end go on
        previous_scores = running_scores
        running_log_probs = top_log_probs + hits.to(torch.float32) * NEG
        next_index = torch.topk(running_log_probs, k=beam)[1]
        running_scores = running_log_probs.gather(1, next_index)
        # the ones among the best `beam` that ended join the finished list if they beat its worst
        just_finished = hits & top_beams[None, :]
        normalized = top_log_probs / ((cur_len + 1 - 1) ** alpha)
        full = torch.all(is_finished, dim=-1, keepdim=True) & (early_stopping is True)
        scores = normalized + full.to(torch.float32) * NEG
        scores += (~unsatisfied).to(torch.float32) * NEG
        scores += (~just_finished) * NEG
        merged_scores = torch.cat((finished_scores, scores), dim=1)
        merged_finished = torch.cat((is_finished, just_finished), dim=1)
        merged_index = torch.topk(merged_scores, k=beam)[1]
        finished_scores = merged_scores.gather(1, merged_index)
        is_finished = merged_finished.gather(1, merged_index)
        parents_l, tokens_l, log_probs_l = parents.tolist(), tokens.tolist(), top_log_probs.tolist()
        normalized_l = normalized.tolist()
        for b, merged in enumerate(merged_index.tolist()):  # a candidate's hypothesis is made only when it joins
            finished[b] = [finished[b][i] if i < beam else
                           Hypothesis(running[b * beam + parents_l[b][i - beam]] + [tokens_l[b][i - beam]],
                                      log_probs_l[b][i - beam], normalized_l[b][i - beam]) for i in merged]
        next_parents = parents.gather(1, next_index)
        next_tokens = tokens.gather(1, next_index)
        if record is not None:
            record.append(_record_step(cur_len - 1, running, previous_scores[0].tolist(), parents_l[0], tokens_l[0],
                                       log_probs_l[0], normalized_l[0], next_index[0].tolist(), hits[0].tolist(),
                                       (scores[0] > NEG / 2).tolist()))
        running = [running[b * beam + p] + [t] for b in range(batch)
                   for p, t in zip(next_parents[b].tolist(), next_tokens[b].tolist())]
        cur_len += 1
        # the best score a running beam could still reach ("never": at the limit, for a length-favouring penalty)
        best_length = max_length - 1 if early_stopping == "never" and alpha > 0.0 else cur_len - 1
        best_possible = running_scores[:, :1] / (best_length ** alpha)
        worst_finished = torch.where(is_finished, torch.min(finished_scores, dim=1, keepdim=True)[0], NEG)
        unsatisfied = unsatisfied & torch.any(best_possible > worst_finished, dim=-1, keepdim=True)
        go_on = bool(torch.any(unsatisfied)) and not (bool(torch.all(is_finished)) and early_stopping is True) \
            and not bool(torch.all(hits))
        if not go_on:
            if record is not None:
                record[-1].stopped = True
            break
        rows = (next_parents + torch.arange(batch, device=device)[:, None] * beam).view(-1)
        scorer.advance(rows.tolist(), next_tokens.view(-1).tolist())
    return [hyps[0] for hyps in finished]


def _record_step(step: int, running: list[list[int]], running_log_probs: list[float], parents: list[int],
                 tokens: list[int], log_probs: list[float], scores: list[float], next_index: list[int],
                 hits: list[bool], joined: list[bool]) -> BeamStep:
    """One step of a recorded search (one sentence): the rows it extended, the top ``2 * beam`` continuations over
    all of them (what transformers ranks), and which went on (kept), ended and were offered to the finished list
    (finished), or were dropped (pruned)."""
    live = [r for r, lp in enumerate(running_log_probs) if lp > NEG / 2]
    position = {r: i for i, r in enumerate(live)}
    kept = {k: row for row, k in enumerate(next_index) if not hits[k]}
    candidates = []
    for k, (p, t, lp, s) in enumerate(zip(parents, tokens, log_probs, scores)):
        if p not in position or lp == float("-inf"):
            continue
        status = "kept" if k in kept else "finished" if joined[k] else "pruned"
        candidates.append(BeamCandidate(position[p], t, lp, s, status, kept.get(k)))
    return BeamStep(step, [running[r] for r in live], [running_log_probs[r] for r in live], candidates)
