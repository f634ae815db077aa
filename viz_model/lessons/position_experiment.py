"""Length generalisation: one tiny Transformer per positional scheme, trained side by side on the same seeded
synthetic task (`watch.train_watch`), then tested on fresh sequences of every length up to beyond the longest
trained, with the attention maps of one probe at a length training never reached.

A learned table gets rows for the unseen positions too (untrained: the point); RoPE, ALiBi and T5's relative bias put
position into the self-attention scores only, so cross-attention sees it only through what self-attention computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ..config.model import POSITIONAL_KINDS
from ..tokenization.tokenizer import PAD_ID
from .watch_trainer import (
    FIRST_SYMBOL,
    MAX_POSITIONS,
    POSITIONAL,
    Snapshot,
    WatchConfig,
    WatchError,
    batch_tensors,
    check_bounds,
    greedy,
    probe_maps,
    target_of,
    train_watch,
)

TASKS = ("copy", "reverse", "shift")
"""The tasks a `LengthExperiment` can name: each output token copies one input position."""
MAX_TEST_LENGTH = MAX_POSITIONS - 2
TEST_SIZE = (1, 500)
PAGE_SECONDS = 90.0
"""The time a page allows the default experiment: its five training budgets (75 s) and their tests."""
Progress = Callable[[float, str], None]
"""Called with the share of the experiment done (0 to 1) and what it is doing (e.g. for ``st.progress``)."""


@dataclass(frozen=True)
class LengthExperiment:
    """The experiment's settings (defaults: copy, the model's five schemes, 2 layers of 4 heads, d_model 32, 500
    steps or 15 s each, trained on lengths 2-8, tested on 2-16: about a minute on a 2-core CPU).

    :ivar task: "copy", "reverse" or "shift" (rotate left by one)
    :ivar schemes: the positional encodings compared, each of `watch.POSITIONAL` at most once ("none" too)
    :ivar min_length: the shortest training sequence
    :ivar max_length: the longest training sequence
    :ivar test_length: the longest test sequence: from ``max_length + 1`` to ``2 * max_length``
    :ivar probe_length: the length of the probe whose maps are kept, beyond ``max_length``
    :ivar symbols: how many distinct symbols the sequences draw from
    :ivar layers: encoder and decoder layers of every model
    :ivar heads: attention heads per layer
    :ivar d_model: the models' width
    :ivar steps: training steps per scheme
    :ivar seconds: the wall-clock budget per scheme (a scheme stopped by it trains fewer steps than the others)
    :ivar test_size: fresh test sequences per length
    :ivar seed: seeds the weights, the training batches (the same for every scheme), the test sequences and probe
    """

    task: str = "copy"
    schemes: tuple[str, ...] = POSITIONAL_KINDS
    min_length: int = 2
    max_length: int = 8
    test_length: int = 16
    probe_length: int = 12
    symbols: int = 10
    layers: int = 2
    heads: int = 4
    d_model: int = 32
    steps: int = 500
    seconds: float = 15.0
    test_size: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise WatchError(f"task must be one of {', '.join(TASKS)}; got {self.task!r}")
        if not isinstance(self.schemes, (tuple, list)) or not self.schemes or \
                any(s not in POSITIONAL for s in self.schemes) or len(set(self.schemes)) != len(self.schemes):
            raise WatchError(f"schemes must be distinct names among {', '.join(POSITIONAL)}; got {self.schemes!r}")
        object.__setattr__(self, "schemes", tuple(self.schemes))
        self.watch_config(self.schemes[0])  # the settings the models share, checked with their own messages
        bounds = {"test_length": (self.max_length + 1, min(2 * self.max_length, MAX_TEST_LENGTH)),
                  "probe_length": (self.max_length + 1, self.test_length), "test_size": TEST_SIZE}
        check_bounds(self, bounds, (int,))

    def watch_config(self, scheme: str) -> WatchConfig:
        """One scheme's training run: room for the test lengths, ten progress reports."""
        return WatchConfig(task=self.task, symbols=self.symbols, min_length=self.min_length,
                           max_length=self.max_length, layers=self.layers, heads=self.heads, d_model=self.d_model,
                           positional=scheme, steps=self.steps, seconds=self.seconds,
                           snapshot_every=max(1, self.steps // 10), seed=self.seed,
                           max_positions=min(self.test_length, MAX_TEST_LENGTH) + 2)

    @property
    def lengths(self) -> list[int]:
        """Every tested length, from ``min_length`` to ``test_length``."""
        return list(range(self.min_length, self.test_length + 1))

    @property
    def unseen(self) -> list[int]:
        """The tested lengths beyond the longest trained."""
        return list(range(self.max_length + 1, self.test_length + 1))


@dataclass
class SchemeRun:
    """One scheme's model, tested.

    :ivar scheme: the positional encoding
    :ivar sequence_accuracy: per tested length (`LengthExperiment.lengths`), the share of greedy outputs exactly right
    :ivar token_accuracy: per tested length, the share of the answer's tokens (and its ``</s>``) predicted right,
        teacher-forced: each given the right ones before it
    :ivar steps: the training steps taken
    :ivar stopped: why its training ended: "steps" or "seconds"
    :ivar train_seconds: how long it trained (with its progress reports)
    :ivar test_seconds: how long its tests and probe took
    :ivar probe: the probe's maps and the model's greedy answer for it
    """

    scheme: str
    sequence_accuracy: list[float]
    token_accuracy: list[float]
    steps: int
    stopped: str
    train_seconds: float
    test_seconds: float
    probe: Snapshot


@dataclass
class LengthResult:
    """What `run_length_experiment` measured.

    :ivar settings: the experiment's settings
    :ivar probe: the probe sequence (symbol ids), ``probe_length`` long
    :ivar runs: by scheme, in the order of ``settings.schemes``; with `stopped`, the schemes finished before
    :ivar stopped: True when `should_stop` ended the experiment early
    :ivar seconds: the whole experiment's wall-clock time
    """

    settings: LengthExperiment
    probe: list[int]
    runs: dict[str, SchemeRun] = field(default_factory=dict)
    stopped: bool = False
    seconds: float = 0.0

    def mean(self, scheme: str, lengths: list[int], measure: str = "sequence_accuracy") -> float:
        """A scheme's accuracy (`measure`: "sequence_accuracy" or "token_accuracy") averaged over `lengths`."""
        curve = getattr(self.runs[scheme], measure)
        return float(np.mean([curve[self.settings.lengths.index(n)] for n in lengths]))

    def longest_half_right(self, scheme: str) -> int | None:
        """The longest tested length at which at least half the scheme's outputs are exactly right (None: none)."""
        found = [n for n, a in zip(self.settings.lengths, self.runs[scheme].sequence_accuracy) if a >= 0.5]
        return max(found, default=None)

    def summary(self) -> str:
        """What was measured, in plain words and numbers only."""
        s = self.settings
        seen, unseen = list(range(s.min_length, s.max_length + 1)), s.unseen
        names = list(self.runs)
        if not names:
            return "Stopped before any scheme finished training."

        def listing(lengths: list[int], measure: str = "sequence_accuracy") -> str:
            return ", ".join(f"{n} {self.mean(n, lengths, measure):.2f}" for n in names)

        lines = [f"{s.task}: one model per scheme ({s.layers} layer{'s' * (s.layers > 1)} of {s.heads} heads, "
                 f"d_model {s.d_model}), "
                 f"trained on lengths {s.min_length}-{s.max_length} for up to {s.steps} steps on the same batches, "
                 f"tested on {s.test_size} fresh sequences per length {s.min_length}-{s.test_length}.",
                 f"Exact-sequence accuracy at the trained lengths {s.min_length}-{s.max_length}: {listing(seen)}.",
                 f"At lengths {unseen[0]}-{unseen[-1]}, never seen in training: {listing(unseen)}.",
                 f"Token accuracy (teacher-forced) at lengths {unseen[0]}-{unseen[-1]}: "
                 f"{listing(unseen, 'token_accuracy')}."]
        reach = [f"{n} {self.longest_half_right(n) or 'none'}" for n in names]
        lines.append(f"Longest length with at least half the sequences exactly right: {', '.join(reach)}.")
        best = max(names, key=lambda n: self.mean(n, unseen))
        if self.mean(best, unseen) < 0.5:
            lines.append("No scheme gets half the unseen-length sequences exactly right.")
        else:
            lines.append(f"Highest exact accuracy at the unseen lengths: {best}.")
        short = [f"{n} (step {r.steps} of {s.steps})" for n, r in self.runs.items() if r.stopped != "steps"]
        if short:
            lines.append(f"Cut short by the time budget: {', '.join(short)}; compare those with care.")
        if self.stopped:
            lines.append(f"Stopped early: {len(names)} of {len(s.schemes)} schemes done.")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The curves and times as plain numbers (for a JSON file)."""
        return {"lengths": self.settings.lengths, "unseen": self.settings.unseen, "seconds": round(self.seconds, 2),
                "runs": {n: {"sequence_accuracy": [round(a, 4) for a in r.sequence_accuracy],
                             "token_accuracy": [round(a, 4) for a in r.token_accuracy], "steps": r.steps,
                             "stopped": r.stopped, "train_seconds": round(r.train_seconds, 2),
                             "test_seconds": round(r.test_seconds, 2), "probe_output": r.probe.output}
                         for n, r in self.runs.items()}}


def fresh_sequences(settings: LengthExperiment) -> dict[int, list[list[int]]]:
    """``test_size`` fresh sequences per tested length, drawn apart from the training batches (another seed)."""
    generator = np.random.default_rng(settings.seed + 3)
    return {n: (generator.integers(0, settings.symbols, size=(settings.test_size, n)) + FIRST_SYMBOL).tolist()
            for n in settings.lengths}


def length_scores(model: torch.nn.Module, cfg: WatchConfig, tests: dict[int, list[list[int]]]
                  ) -> tuple[list[float], list[float]]:
    """Per length of `tests`: exact-sequence accuracy (greedy) and teacher-forced token accuracy."""
    inputs = [x for group in tests.values() for x in group]
    found = greedy(model, cfg, inputs)
    exact = np.array([f == target_of(cfg.task, x, cfg.shift) for f, x in zip(found, inputs)], dtype=float)
    src, tgt_in, gold = batch_tensors(cfg, inputs)
    with torch.inference_mode():
        logits = model(src, tgt_in, positions=cfg.uses_positions).logits
    real = gold != PAD_ID
    tokens = (((logits.argmax(-1) == gold) & real).sum(-1) / real.sum(-1)).numpy()
    edges = np.cumsum([0, *(len(group) for group in tests.values())])
    return ([float(exact[a:b].mean()) for a, b in zip(edges, edges[1:])],
            [float(tokens[a:b].mean()) for a, b in zip(edges, edges[1:])])


def run_length_experiment(settings: LengthExperiment, progress: Progress | None = None,
                          should_stop: Callable[[], bool] = lambda: False) -> LengthResult:
    """Train one model per scheme, test each on every length and keep the probe's maps. `progress` hears after
    every tenth of a scheme's steps and each test; `should_stop` ends the run between reports (finished schemes
    kept)."""
    started = time.perf_counter()
    tests = fresh_sequences(settings)
    probe = (np.random.default_rng(settings.seed + 4).integers(0, settings.symbols, size=settings.probe_length)
             + FIRST_SYMBOL).tolist()
    result = LengthResult(settings, probe)
    count = len(settings.schemes)
    report = progress or (lambda done, text: None)
    for index, scheme in enumerate(settings.schemes):
        cfg = settings.watch_config(scheme)

        def heard(run, index=index, scheme=scheme) -> None:
            step = run.history[-1]["step"]
            done = max(step / settings.steps, min(1.0, run.seconds / settings.seconds))
            report((index + 0.9 * done) / count, f"{scheme}: step {step} of {settings.steps}")

        trained = train_watch(cfg, should_stop, heard, eval_size=16)
        if trained.stopped == "stopped":
            result.stopped = True
            break
        report((index + 0.9) / count, f"{scheme}: testing lengths {settings.min_length}-{settings.test_length}")
        tested = time.perf_counter()
        sequence, token = length_scores(trained.model, cfg, tests)
        maps = probe_maps(trained.model, cfg, probe, trained.history[-1]["step"])
        result.runs[scheme] = SchemeRun(scheme, sequence, token, trained.history[-1]["step"], trained.stopped,
                                        trained.seconds, time.perf_counter() - tested, maps)
        report((index + 1) / count, f"{scheme}: done")
        if should_stop() and index + 1 < count:
            result.stopped = True
            break
    result.seconds = time.perf_counter() - started
    return result

