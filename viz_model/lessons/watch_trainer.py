"""Watch attention form: a tiny Transformer learns a synthetic sequence task while snapshots of its attention maps
on a fixed probe sequence are kept, so a learner can scrub from the first, uniform maps to the final pattern.

Tasks (sequences of random symbols, output a function of the input): ``copy`` (y = x), ``reverse``, ``sort``,
``shift`` (rotate left by k: y = x[k:] + x[:k]) and ``every_other`` (y = x[0], x[2], ...). Positional encoding is
one of the model's schemes (``sinusoidal``, ``learned``, ``rope``, ``alibi``, ``relative``) or ``none`` (the same
model run with ``positions=False``: its attention cannot tell positions apart, so reverse and shift fail).
Everything is seeded: the same `WatchConfig` gives the same curves and maps, also while other threads (browser
sessions) train at the same time. Training is bounded in steps, seconds and sizes (`LIMITS`), and stops when
`should_stop` says so.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F

from ..config import ModelConfig
from ..config.checks import check_int
from ..config.model import POSITIONAL_KINDS
from ..data.batching import pad
from ..nn.devices import one_thread
from ..nn.model import Transformer
from ..search.decoding import beam_search
from ..tokenization.tokenizer import BOS_ID, EOS_ID, PAD_ID

TASKS = ("copy", "reverse", "sort", "shift", "every_other")
"""The synthetic tasks a `WatchConfig` can name."""
POSITIONAL = (*POSITIONAL_KINDS, "none")
"""The positional encodings a `WatchConfig` can name: the model's schemes, or none."""
FIRST_SYMBOL = EOS_ID + 1
WARMUP_STEPS = 30
_SEEDING = threading.Lock()  # ids 0-3 are <pad> <unk> <s> </s>; symbols follow
LIMITS = {"symbols": (2, 26), "length": (2, 16), "layers": (1, 2), "heads": (1, 4), "d_model": (16, 64),
          "steps": (1, 5000), "batch": (1, 256), "seconds": (1.0, 120.0), "snapshot_every": (1, 1000)}
MAX_POSITIONS = 2 * LIMITS["length"][1] + 2  # room to test sequences twice the longest trained


class WatchError(ValueError):
    """A setting of the synthetic training is out of its bounds; the message names it."""


def check_bounds(settings: object, bounds: dict[str, tuple[float, float]],
                 kinds: tuple[type, ...] = (int, float)) -> None:
    """Each named setting is within its ``(low, high)``: an integer (`check_int`) where both bounds are, else a
    number of `kinds`; else a `WatchError` naming it."""
    for name, (low, high) in bounds.items():
        value = getattr(settings, name)
        message = f"{name} must be in [{low}, {high}], got {value!r}"
        if isinstance(low, int) and isinstance(high, int):
            check_int(name, value, low, high, error=WatchError, message=message)
        elif isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
            raise WatchError(message)


@dataclass(frozen=True)
class WatchConfig:
    """One synthetic training run (defaults: copy, 1 layer of 2 heads, d_model 32, a budget of 30 s).

    :ivar task: one of `TASKS`: copy, reverse, sort, shift or every_other
    :ivar shift: the rotation of the shift task
    :ivar symbols: how many distinct symbols the sequences draw from
    :ivar min_length: the shortest input sequence
    :ivar max_length: the longest input sequence (the probe has this length)
    :ivar layers: encoder and decoder layers
    :ivar heads: attention heads per layer
    :ivar d_model: the model's width
    :ivar positional: "sinusoidal", "learned", "rope", "alibi", "relative" (see `ModelConfig.positional`) or "none"
        (the model runs without positional encodings)
    :ivar steps: training steps (with the learning rate's decay, copy and reverse reach full held-out accuracy)
    :ivar batch: sequences per training step
    :ivar learning_rate: Adam's peak learning rate
    :ivar seconds: the wall-clock budget: training stops at `steps` or `seconds`, whichever comes first
    :ivar snapshot_every: steps between two snapshots of the probe's maps
    :ivar seed: seeds the initial weights, the batches, the probe and the held-out sequences
    :ivar max_positions: the longest sequence the model can read, in tokens; 0: ``max_length + 2``, all training
        needs (more gives a learned table rows that training never reaches, to test longer sequences)
    """

    task: str = "copy"
    shift: int = 1
    symbols: int = 10
    min_length: int = 4
    max_length: int = 8
    layers: int = 1
    heads: int = 2
    d_model: int = 32
    positional: str = "sinusoidal"
    steps: int = 800
    batch: int = 64
    learning_rate: float = 3e-3
    seconds: float = 30.0
    snapshot_every: int = 50
    seed: int = 0
    max_positions: int = 0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise WatchError(f"task must be one of {', '.join(TASKS)}; got {self.task!r}")
        if self.positional not in POSITIONAL:
            raise WatchError(f"positional must be one of {', '.join(POSITIONAL)}; got {self.positional!r}")
        bounds = {**LIMITS, "min_length": LIMITS["length"], "max_length": LIMITS["length"]}
        del bounds["length"]
        check_bounds(self, bounds)
        if self.min_length > self.max_length:
            raise WatchError(f"min_length ({self.min_length}) is above max_length ({self.max_length})")
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise WatchError(f"d_model ({self.d_model}) must split into {self.heads} heads of even width")
        if not 1 <= self.shift < self.min_length:
            raise WatchError(f"shift must be in [1, min_length - 1 = {self.min_length - 1}], got {self.shift}")
        message = (f"max_positions must be 0 or in [max_length + 2 = {self.max_length + 2}, {MAX_POSITIONS}], got "
                   f"{self.max_positions!r}")
        if check_int("max_positions", self.max_positions, 0, MAX_POSITIONS, error=WatchError, message=message):
            check_int("max_positions", self.max_positions, self.max_length + 2, error=WatchError, message=message)
        if not 0 < self.learning_rate <= 0.1:
            raise WatchError(f"learning_rate must be in (0, 0.1], got {self.learning_rate}")

    def model_config(self) -> ModelConfig:
        """The tiny Transformer: post-norm, tied embeddings, no dropout (a deterministic picture)."""
        return ModelConfig(vocab_size=FIRST_SYMBOL + self.symbols, encoder_layers=self.layers,
                           decoder_layers=self.layers, d_model=self.d_model, heads=self.heads, d_ff=4 * self.d_model,
                           dropout=0.0, max_positions=self.max_positions or self.max_length + 2,
                           positional="sinusoidal" if self.positional == "none" else self.positional)

    @property
    def uses_positions(self) -> bool:
        """False when `positional` is "none"."""
        return self.positional != "none"


def target_of(task: str, symbols: list[int], shift: int = 1) -> list[int]:
    """The task's output for one input sequence."""
    if task == "copy":
        return list(symbols)
    if task == "reverse":
        return symbols[::-1]
    if task == "sort":
        return sorted(symbols)
    if task == "shift":
        return symbols[shift:] + symbols[:shift]
    if task == "every_other":
        return symbols[::2]
    raise WatchError(f"task must be one of {', '.join(TASKS)}; got {task!r}")


def expected_source(task: str, length: int, shift: int = 1) -> list[int] | None:
    """For position-only tasks, the source position each output copies (None for sort: it depends on values)."""
    order = {"copy": list(range(length)), "reverse": list(range(length))[::-1],
             "shift": [(i + shift) % length for i in range(length)], "every_other": list(range(0, length, 2))}
    return order.get(task)


def sample(cfg: WatchConfig, count: int, generator: np.random.Generator) -> list[list[int]]:
    """`count` random input sequences (symbol ids, lengths uniform in the config's range)."""
    lengths = generator.integers(cfg.min_length, cfg.max_length + 1, size=count)
    return [(generator.integers(0, cfg.symbols, size=n) + FIRST_SYMBOL).tolist() for n in lengths]


def parse_sequence(text: str, cfg: WatchConfig) -> list[int]:
    """A learner's sequence of letters (``B A D C``, spaces optional) as symbol ids, checked against the trained
    model's alphabet and lengths."""
    letters = [c for c in text.upper() if not c.isspace()]
    alphabet = "".join(chr(ord("A") + i) for i in range(cfg.symbols))
    wrong = sorted({c for c in letters if c not in alphabet})
    if wrong:
        raise WatchError(f"{', '.join(repr(c) for c in wrong[:5])} not in this model's alphabet {alphabet[0]}–"
                         f"{alphabet[-1]} ({cfg.symbols} symbols)")
    if not cfg.min_length <= len(letters) <= cfg.max_length:
        raise WatchError(f"{len(letters)} symbols; the model was trained on {cfg.min_length} to {cfg.max_length} "
                         "(longer sequences need positions it never saw)")
    return [FIRST_SYMBOL + alphabet.index(c) for c in letters]


def batch_tensors(cfg: WatchConfig, inputs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source ``x </s>``, decoder input ``<s> y`` and gold ``y </s>``, padded."""
    outputs = [target_of(cfg.task, x, cfg.shift) for x in inputs]
    src = pad([x + [EOS_ID] for x in inputs], PAD_ID)
    tgt_in = pad([[BOS_ID, *y] for y in outputs], PAD_ID)
    gold = pad([[*y, EOS_ID] for y in outputs], PAD_ID)
    return src, tgt_in, gold


@dataclass
class Snapshot:
    """The probe's attention maps at one step: per layer ``(heads, query, key)`` for each kind.

    :ivar step: the training step
    :ivar encoder: per layer, the encoder self-attention maps
    :ivar decoder: per layer, the decoder self-attention maps
    :ivar cross: per layer, the cross-attention maps
    :ivar output: the model's greedy output for the probe (symbol ids, without ``</s>``)
    """

    step: int
    encoder: list[np.ndarray]
    decoder: list[np.ndarray]
    cross: list[np.ndarray]
    output: list[int]


@dataclass
class WatchResult:
    """What `train_watch` kept: the curves, the snapshots and the trained model.

    :ivar config: the run's settings
    :ivar probe: the fixed input sequence whose maps the snapshots hold (symbol ids)
    :ivar history: per recorded step: step, loss, token_accuracy and sequence_accuracy (held out)
    :ivar snapshots: the probe's maps, every ``snapshot_every`` steps and at the last
    :ivar model: the trained model
    :ivar stopped: why training ended: "steps", "seconds" or "stopped"
    :ivar seconds: how long it trained
    """

    config: WatchConfig
    probe: list[int]
    history: list[dict[str, float]] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    model: Transformer | None = None
    stopped: str = ""
    seconds: float = 0.0

    @property
    def final_accuracy(self) -> float:
        """The held-out sequence accuracy at the last recorded step."""
        return self.history[-1]["sequence_accuracy"] if self.history else 0.0

    def to_npz(self) -> dict[str, np.ndarray]:
        """The snapshots as arrays (``cross_layer1`` is ``(snapshots, heads, query, key)``, ...) for an NPZ file."""
        out: dict[str, np.ndarray] = {"steps": np.array([s.step for s in self.snapshots]),
                                      "probe": np.array(self.probe)}
        for kind in ("encoder", "decoder", "cross"):
            for layer in range(self.config.layers):
                out[f"{kind}_layer{layer + 1}"] = np.stack([getattr(s, kind)[layer] for s in self.snapshots])
        return out


def greedy(model: Transformer, cfg: WatchConfig, inputs: list[list[int]]) -> list[list[int]]:
    """The model's greedy outputs for `inputs` (without ``</s>``)."""
    src = pad([x + [EOS_ID] for x in inputs], PAD_ID)
    lengths = [len(target_of(cfg.task, x, cfg.shift)) + 1 for x in inputs]
    hyps = beam_search(model, src, beam=1, alpha=0.0, max_lens=lengths, positions=cfg.uses_positions)
    return [[t for t in h.tokens if t != EOS_ID] for h in hyps]


def sequence_accuracy(model: Transformer, cfg: WatchConfig, inputs: list[list[int]]) -> float:
    """The share of `inputs` whose greedy output is exactly the task's answer."""
    found = greedy(model, cfg, inputs)
    return float(np.mean([f == target_of(cfg.task, x, cfg.shift) for f, x in zip(found, inputs)]))


def probe_maps(model: Transformer, cfg: WatchConfig, probe: list[int], step: int) -> Snapshot:
    """The probe's maps, teacher-forced on its correct output, and the model's own greedy answer."""
    src, tgt_in, _ = batch_tensors(cfg, [probe])
    with torch.inference_mode():
        out = model(src, tgt_in, need_weights=True, positions=cfg.uses_positions)
    maps = {kind: [a[0].numpy().copy() for a in getattr(out, name)] for kind, name in
            (("encoder", "encoder_attentions"), ("decoder", "decoder_attentions"), ("cross", "cross_attentions"))}
    return Snapshot(step, maps["encoder"], maps["decoder"], maps["cross"], greedy(model, cfg, [probe])[0])


class StepBudget(Protocol):
    """What `training_steps` reads of a run's settings (a `WatchConfig`, an induction run's config)."""

    steps: int
    snapshot_every: int
    seconds: float


def training_steps(cfg: StepBudget, started: float, should_stop: Callable[[], bool],
                   record: Callable[[int], None], batch_loss: Callable[[], torch.Tensor],
                   optimizer: torch.optim.Optimizer, schedule: torch.optim.lr_scheduler.LRScheduler) -> str:
    """Up to ``cfg.steps`` optimizer steps on `batch_loss`, with `record(step)` every ``cfg.snapshot_every`` steps,
    at the last and where training ends early (``cfg.seconds`` after `started`, or `should_stop`); returns why it
    ended: "steps", "seconds" or "stopped"."""
    step, recorded = 0, -1
    while True:
        if step % cfg.snapshot_every == 0 or step == cfg.steps:
            record(step)
            recorded = step
        if step == cfg.steps:
            return "steps"
        stop = should_stop()
        if stop or time.perf_counter() - started > cfg.seconds:
            if recorded != step:
                record(step)
            return "stopped" if stop else "seconds"
        loss = batch_loss()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        step += 1


def train_watch(cfg: WatchConfig, should_stop: Callable[[], bool] = lambda: False,
                on_progress: Callable[[WatchResult], None] | None = None, eval_size: int = 128) -> WatchResult:
    """Train a tiny model on `cfg`'s task from scratch, keeping loss and accuracy and a snapshot of the probe's maps
    every ``snapshot_every`` steps and at the last step (`on_progress` is called after each). Training ends at
    ``steps``, after ``seconds`` or when `should_stop` returns True, whichever comes first. Runs on one thread
    (`one_thread`)."""
    with one_thread():
        return _train_watch(cfg, should_stop, on_progress, eval_size)


def _train_watch(cfg: WatchConfig, should_stop: Callable[[], bool],
                 on_progress: Callable[[WatchResult], None] | None, eval_size: int) -> WatchResult:
    with _SEEDING:  # the initial weights come from torch's global generator: one seeded creation at a time
        torch.manual_seed(cfg.seed)
        model = Transformer(cfg.model_config())
    generator = np.random.default_rng(cfg.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.98), foreach=True)
    # a short warm-up, then a linear decay over the planned steps: without it the accuracy keeps jumping about
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / WARMUP_STEPS)
                                                 * max(0.0, 1.0 - step / cfg.steps))
    probe = sample(dataclasses.replace(cfg, min_length=cfg.max_length), 1, np.random.default_rng(cfg.seed + 1))[0]
    held_out = sample(cfg, eval_size, np.random.default_rng(cfg.seed + 2))
    result = WatchResult(cfg, probe, model=model, stopped="steps")
    started = time.perf_counter()
    loss_value: float | None = None  # no training batch yet at step 0
    token_accuracy = 0.0

    def record(step: int) -> None:
        model.eval()
        result.history.append({"step": step, "loss": loss_value, "token_accuracy": token_accuracy,
                               "sequence_accuracy": sequence_accuracy(model, cfg, held_out)})
        result.snapshots.append(probe_maps(model, cfg, probe, step))
        result.seconds = time.perf_counter() - started
        if on_progress is not None:
            on_progress(result)

    def batch_loss() -> torch.Tensor:
        nonlocal loss_value, token_accuracy
        model.train()
        src, tgt_in, gold = batch_tensors(cfg, sample(cfg, cfg.batch, generator))
        logits = model(src, tgt_in, positions=cfg.uses_positions).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), gold.reshape(-1), ignore_index=PAD_ID)
        real = gold != PAD_ID
        loss_value = float(loss.detach())
        token_accuracy = float(((logits.detach().argmax(-1) == gold) & real).sum() / real.sum())
        return loss

    result.stopped = training_steps(cfg, started, should_stop, record, batch_loss, optimizer, schedule)
    model.eval()
    result.seconds = time.perf_counter() - started
    return result
