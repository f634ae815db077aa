"""What a search finds and records: hypotheses, the candidates and steps of a beam search, a recorded tree.

The leaf that both rules (`viz_model.search.project_rule`, `viz_model.search.transformers_rule`) and their dispatcher
(`viz_model.search.decoding`) share; it imports no search.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class Hypothesis:
    """One finished output: generated ids (ending in ``</s>`` unless cut at the length limit)."""

    tokens: list[int]
    log_prob: float  # sum of log-probabilities of `tokens`
    score: float  # log_prob / length penalty: what beam search ranks by
    # (len(tokens), vocab) float32: the full-precision logits before each token (none masked), where a verified search
    # holds them already and its caller asked for them (`beam_search(step_logits=True)`); else None
    step_logits: Tensor | None = field(default=None, repr=False, compare=False)


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

    @classmethod
    def recorded(cls, steps: list[BeamStep], best: Hypothesis, beam: int, alpha: float, max_len: int,
                 rule: str) -> BeamTree:
        """The tree of a search's recorded `steps` that found `best`: its finished hypotheses and the best's path."""
        finished = [Hypothesis(prefix + [c.token], c.log_prob, c.score)
                    for s in steps for c in s.candidates if c.status == "finished"
                    for prefix in [s.alive[c.parent]]]
        tree = cls(beam, alpha, steps, finished, best, max_len, rule=rule)
        # the best hypothesis' path: at step t the candidate extending best.tokens[:t] with best.tokens[t]
        for t, s in enumerate(steps[:len(best.tokens)]):
            for i, c in enumerate(s.candidates):
                if s.alive[c.parent] == best.tokens[:t] and c.token == best.tokens[t]:
                    tree.chosen_path.append((t, i))
                    break
        return tree
