"""Induction heads forming, live: a 2-layer attention-only decoder-only model learns to predict repeated random
sequences (a start token, L random symbols, the same L again), as Olsson et al. (2022) watched in larger models.

The first copy cannot be predicted (its loss stays near log(symbols)); the second can, once a head attends from each
token to the one that followed its earlier copy. L varies from sequence to sequence (the rest is padding, not
trained on): with one L a layer-0 head could attend a fixed distance back by position alone and score as an
induction head without reading any token. The run keeps the loss of each half, each head's induction score
(`viz_model.analysis.lm_head_roles.induction_score`) on fixed seeded probe sequences, and the maps of the first probe,
every ``snapshot_every`` steps. Everything is seeded and bounded (`LIMITS`); it trains on one thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from ..analysis.lm_head_roles import induction_score, previous_token_score, repeated_tokens
from ..config import ModelConfig
from ..config.checks import check_int
from ..nn.causal_lm import CausalLM
from .watch_trainer import _SEEDING, WatchError, one_thread, training_steps

START_ID = 0  # the start token; symbols are ids 1..symbols, padding symbols + 1
PROBES = 8
LIMITS = {"symbols": (4, 256), "min_length": (2, 64), "length": (4, 64), "copies": (2, 8), "layers": (1, 2),
          "heads": (1, 8), "d_model": (16, 128), "steps": (1, 5000), "batch": (1, 256), "snapshot_every": (1, 1000),
          "seed": (0, 1_000_000)}
MAX_SECONDS = 900.0


@dataclass(frozen=True)
class InductionConfig:
    """One run (defaults: the settings measured to show the phase change on a laptop CPU in its time budget).

    :ivar symbols: how many distinct random symbols a sequence draws from
    :ivar min_length: the fewest symbols in one copy
    :ivar length: the most symbols in one copy, L (a sequence is a start token and `copies` copies of min_length
        to length symbols, padded to copies * L + 1 tokens)
    :ivar copies: how many times the random symbols repeat
    :ivar layers: attention-only layers (induction needs two: a previous-token head, then one that reads it)
    :ivar heads: heads per layer
    :ivar d_model: the model's width
    :ivar steps: training steps (Adam, constant learning rate after a short warm-up)
    :ivar batch: sequences per step (fresh random ones every step)
    :ivar learning_rate: Adam's learning rate
    :ivar seconds: the wall-clock budget: training stops at `steps` or `seconds`, whichever comes first
    :ivar snapshot_every: steps between two measurements (scores, maps, loss of each half)
    :ivar seed: seeds the weights, the batches and the probes
    :ivar positional: the model's positions: "rope" (relative: a previous-token head is one rotation away) or
        "learned"
    :ivar init_std: the standard deviation of the initial weight matrices and embeddings (with GPT-2's 0.02 every
        head stays uniform for longer, and for some seeds the plateau outlasted the default steps)
    """

    symbols: int = 32
    min_length: int = 4
    length: int = 16
    copies: int = 2
    layers: int = 2
    heads: int = 2
    d_model: int = 64
    steps: int = 2000
    batch: int = 32
    learning_rate: float = 1e-3
    seconds: float = 60.0
    snapshot_every: int = 25
    seed: int = 0
    positional: str = "rope"
    init_std: float = 0.08

    def __post_init__(self) -> None:
        for name, (low, high) in LIMITS.items():
            check_int(name, getattr(self, name), low, high, error=WatchError,
                      message=f"{name} must be an integer from {low} to {high}, got {getattr(self, name)!r}")
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise WatchError(f"d_model ({self.d_model}) must split into {self.heads} heads of even width")
        if self.min_length > self.length:
            raise WatchError(f"min_length ({self.min_length}) is above length ({self.length})")
        if self.length > self.symbols:
            raise WatchError(f"length ({self.length}) must be at most symbols ({self.symbols}): the probes hold "
                             "distinct symbols")
        if isinstance(self.learning_rate, bool) or not 0 < self.learning_rate <= 0.1:
            raise WatchError(f"learning_rate must be in (0, 0.1], got {self.learning_rate!r}")
        if self.positional not in ("rope", "learned"):
            raise WatchError(f"positional must be rope or learned, got {self.positional!r}")
        if isinstance(self.init_std, bool) or not 0 < self.init_std <= 1:
            raise WatchError(f"init_std must be in (0, 1], got {self.init_std!r}")
        if isinstance(self.seconds, bool) or not 0 < self.seconds <= MAX_SECONDS:
            raise WatchError(f"seconds must be in (0, {MAX_SECONDS:g}], got {self.seconds!r}")

    def model_config(self) -> ModelConfig:
        """The attention-only decoder: pre-norm, tied embeddings, no dropout."""
        return ModelConfig(kind="decoder", vocab_size=self.symbols + 2, encoder_layers=0, decoder_layers=self.layers,
                           d_model=self.d_model, heads=self.heads, d_ff=self.d_model, dropout=0.0, norm="pre",
                           positional=self.positional, max_positions=self.copies * self.length + 1, attention_only=True)


def pad_id(cfg: InductionConfig) -> int:
    return cfg.symbols + 1


def sequences(cfg: InductionConfig, count: int, generator: np.random.Generator) -> torch.Tensor:
    """``(count, copies * L + 1)``: the start token, then l random symbols (drawn with repeats, l uniform from
    min_length to L) `copies` times, then padding."""
    out = np.full((count, cfg.copies * cfg.length + 1), pad_id(cfg))
    out[:, 0] = START_ID
    for row, size in zip(out, generator.integers(cfg.min_length, cfg.length + 1, size=count)):
        row[1:cfg.copies * size + 1] = np.tile(generator.integers(1, cfg.symbols + 1, size=size), cfg.copies)
    return torch.from_numpy(out)


def probes(cfg: InductionConfig) -> list[list[int]]:
    """`PROBES` seeded sequences of distinct symbols `copies` times after the start token (`repeated_tokens`), their
    lengths spread from L down to min_length (the first: L)."""
    sizes = np.linspace(cfg.length, cfg.min_length, PROBES).round().astype(int)
    return [repeated_tokens(cfg.symbols + 1, int(size), cfg.copies, cfg.seed + 1000 + i, [START_ID], [START_ID])
            for i, size in enumerate(sizes)]


@dataclass
class InductionSnapshot:
    """One measurement.

    :ivar step: the training step
    :ivar loss_first: mean cross-entropy of the first copy's predictions on the probes (nats)
    :ivar loss_repeat: the same on the later copies (what induction can lower)
    :ivar induction: ``(layers, heads)`` each head's induction score, mean over the probes
    :ivar previous: ``(layers, heads)`` each head's previous-token score, mean over the probes (the first half of
        the circuit: a previous-token head in layer 1, whose output the induction head in layer 2 matches against)
    :ivar maps: per layer ``(heads, n, n)`` the first probe's attention maps
    """

    step: int
    loss_first: float
    loss_repeat: float
    induction: np.ndarray
    previous: np.ndarray
    maps: list[np.ndarray]


@dataclass
class InductionResult:
    """What `train_induction` kept.

    :ivar config: the run's settings
    :ivar probes: the probe sequences
    :ivar history: per training step, ``{"step", "loss"}`` (the batch's loss over both copies)
    :ivar snapshots: measurements every ``snapshot_every`` steps and at the last
    :ivar model: the trained model
    :ivar stopped: why training ended: "steps", "seconds" or "stopped"
    :ivar seconds: how long it trained
    """

    config: InductionConfig
    probes: list[list[int]]
    history: list[dict[str, float]] = field(default_factory=list)
    snapshots: list[InductionSnapshot] = field(default_factory=list)
    model: CausalLM | None = None
    stopped: str = ""
    seconds: float = 0.0

    @property
    def chance_loss(self) -> float:
        """log(symbols): the loss of a uniform guess, all the first copy allows."""
        return math.log(self.config.symbols)

    def best_head(self, snapshot: int = -1) -> tuple[int, int]:
        """(layer, head) with the highest induction score at `snapshot`."""
        scores = self.snapshots[snapshot].induction
        layer, head = np.unravel_index(int(np.nanargmax(scores)), scores.shape)
        return int(layer), int(head)


@torch.inference_mode()
def measure(model: CausalLM, cfg: InductionConfig, probe_ids: list[list[int]], step: int) -> InductionSnapshot:
    """The probes' loss on each copy, each head's induction score and the first probe's maps."""
    model.eval()
    first, repeat, scores, previous, maps = [], [], [], [], []
    for ids in probe_ids:
        tensor = torch.tensor([ids])
        out = model(tensor[:, :-1], need_weights=True)
        losses = F.cross_entropy(out.logits[0], tensor[0, 1:], reduction="none")  # predicting tokens 1..2l
        half = (len(ids) - 1) // cfg.copies
        first.append(losses[:half].mean())
        repeat.append(losses[half:].mean())
        layers = [record.weights[0].double().numpy() for record in out.records]
        scores.append([induction_score(weights, ids[:-1]) for weights in layers])
        previous.append([previous_token_score(weights) for weights in layers])
        maps = maps or layers
    return InductionSnapshot(step, float(torch.stack(first).mean()), float(torch.stack(repeat).mean()),
                             np.mean(scores, axis=0), np.mean(previous, axis=0), maps)


def train_induction(cfg: InductionConfig, should_stop: Callable[[], bool] = lambda: False,
                    on_progress: Callable[[InductionResult], None] | None = None) -> InductionResult:
    """Train the model of `cfg` from scratch on fresh repeated random sequences, measuring every ``snapshot_every``
    steps and at the last (`on_progress` after each); ends at ``steps``, after ``seconds`` or when `should_stop`
    returns True. Runs on one thread (`one_thread`)."""
    with one_thread():
        with _SEEDING:  # the initial weights come from torch's global generator: one seeded creation at a time
            torch.manual_seed(cfg.seed)
            model = CausalLM(cfg.model_config())
            for weights in model.parameters():
                if weights.dim() > 1:
                    torch.nn.init.normal_(weights, std=cfg.init_std)
        generator = np.random.default_rng(cfg.seed)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.98), foreach=True)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))
        probe_ids = probes(cfg)
        result = InductionResult(cfg, probe_ids, model=model, stopped="steps")
        started = time.perf_counter()

        def record(step: int) -> None:
            result.snapshots.append(measure(model, cfg, probe_ids, step))
            result.seconds = time.perf_counter() - started
            if on_progress is not None:
                on_progress(result)

        def batch_loss() -> torch.Tensor:
            model.train()
            batch = sequences(cfg, cfg.batch, generator)
            logits = model(batch[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1),
                                   ignore_index=pad_id(cfg))
            result.history.append({"step": len(result.history) + 1, "loss": float(loss.detach())})
            return loss

        result.stopped = training_steps(cfg, started, should_stop, record, batch_loss, optimizer, warmup)
        model.eval()
        result.seconds = time.perf_counter() - started
        return result


def steepest_drop(result: InductionResult) -> tuple[int, int] | None:
    """(from step, to step): the two snapshots between which the repeat's loss fell most, None without two."""
    shots = result.snapshots
    if len(shots) < 2:
        return None
    drops = [shots[i].loss_repeat - shots[i + 1].loss_repeat for i in range(len(shots) - 1)]
    i = int(np.argmax(drops))
    return shots[i].step, shots[i + 1].step


def summary(result: InductionResult, formed: float = 0.5) -> str:
    """What the run shows, in plain numbers: the repeat's loss before and after against chance, the strongest
    induction head's score before and after, the previous-token head beneath it, and whether any head reached
    `formed`."""
    first, last = result.snapshots[0], result.snapshots[-1]
    layer, head = result.best_head()
    lines = [f"Loss on the repeated copy: {first.loss_repeat:.2f} at step {first.step}, {last.loss_repeat:.2f} at "
             f"step {last.step} (the first copy stays near chance, log {result.config.symbols} = "
             f"{result.chance_loss:.2f}: it cannot be predicted)."]
    lines.append(f"The strongest induction head, layer {layer + 1} head {head + 1}, scored "
                 f"{first.induction[layer, head]:.2f} before training and {last.induction[layer, head]:.2f} after.")
    if layer:
        lines.append(f"The best previous-token score in the layers below it is {last.previous[:layer].max():.2f}.")
    drop = steepest_drop(result)
    if last.induction.max() >= formed and drop is not None:
        lines.append(f"The repeat's loss fell fastest between steps {drop[0]} and {drop[1]}, while the induction "
                     "scores rose: the phase change.")
    else:
        lines.append(f"No head reached an induction score of {formed} in this run: at this size it needs more "
                     "steps (or another seed).")
    return " ".join(lines)
