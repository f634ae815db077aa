"""The resumable training loop (single process, or DDP under torchrun).

Run directory layout::

    config.json            the resolved TrainConfig
    tokenizer.model        joint SentencePiece model, trained on the training parts of all corpora only (or, with
                           init_from, copied from that model directory)
    latest.pt              full training state (model, optimizer, position in the data, RNG), written atomically
    epochs/epoch_NNN.safetensors   weights at the end of each epoch (the last K are kept, then averaged)
    log.jsonl              one JSON object per event: train / val / test
    model/                 the exported, averaged model directory (what `viz_model.load` reads)

Killed at any moment, ``viz-model train --resume RUN_DIR`` continues from ``latest.pt`` with the same model,
optimizer, schedule, data order and RNG state, so the result equals an uninterrupted run.

With ``init_from`` a new run starts from an exported model directory's weights (fp32) and tokenizer instead of a
random initialisation and a new tokenizer; optimizer, schedule (warm-up included) and data order start fresh.
A resumed run takes everything from ``latest.pt`` and does not read that directory again.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from ..checkpoint import CheckpointError, atomic_write_bytes, load_model_dir, save_weights
from ..config import ConfigError, TrainConfig, apply_override
from ..model import Transformer
from ..recipe import cooldown_factor, cooldown_window, label_smoothed_loss, learning_rate
from ..tokenizer import PAD_ID, Tokenizer, train_tokenizer
from .checkpoints import (
    CONFIG_FILE,
    LATEST,
    LOG_FILE,
    TOKENIZER_FILE,
    average_checkpoints,
    load_state,
    save_state,
    training_state,
)
from .corpora import load_corpora
from .data import Batch, EncodedPairs, EvalSet, collate, concat_pairs, encode_pairs, make_batches, sample_epoch
from .evaluate import evaluate_bleu
from .export import evaluate_sets, write_model_dir


class LabelSmoothedLoss(nn.Module):
    """The model's summed label-smoothed loss (`label_smoothed_loss`) and plain NLL over non-padding target positions;
    only those positions go through the output projection."""

    def __init__(self, model: Transformer, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.model.encode(src)
        hidden = self.model.decode(tgt_in, encoded).hidden
        keep = tgt_out != PAD_ID
        return label_smoothed_loss(self.model.logits(hidden[keep]), tgt_out[keep], self.smoothing)


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Adam:
    """Adam(beta1, beta2, eps) as in the paper; the fused kernel on CUDA."""
    return torch.optim.Adam(model.parameters(), lr=learning_rate(1, cfg), betas=(cfg.adam_beta1, cfg.adam_beta2),
                            eps=cfg.adam_eps, weight_decay=cfg.weight_decay, fused=device.type == "cuda" or None)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX); elsewhere bf16 is emulated and slow."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # a torch without these probes: assume not
        return False


def native_bf16(device: torch.device) -> bool:
    """Whether `device` runs bf16 matmuls natively: CUDA, or a CPU with AVX512-BF16 / AMX."""
    return device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16())


def bf16_autocast_used(device: torch.device, cfg: TrainConfig) -> bool:
    """`bf16 = true` trains under bf16 autocast on CUDA and on CPUs with native bf16; fp32 elsewhere."""
    return cfg.bf16 and native_bf16(device)


def autocast_for(device: torch.device, bf16: bool) -> Any:
    """bf16 autocast on `device` when `bf16` (weights, optimizer and the loss's log-softmax stay fp32), else none."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def resumed_bf16(state: dict[str, Any], device: torch.device, cfg: TrainConfig, changes: list[str] | None,
                 verbose: bool) -> bool:
    """The precision a resumed run continues in: the one it trained in (an exact continuation), unless `bf16=...` is
    among the resume's changes, or this machine lacks the native bf16 it trained with (then fp32)."""
    available = bf16_autocast_used(device, cfg)
    if any(item.partition("=")[0].strip() == "bf16" for item in changes or []):
        return available
    # training states from before CPU bf16 existed: bf16 only on CUDA
    trained = bool(state.get("bf16_autocast", cfg.bf16 and device.type == "cuda"))
    if verbose and trained != available:
        print("viz-model: " + (
            "this run trained under bf16 autocast, which this device does not run natively: it continues in fp32"
            if trained else "this run trained in fp32 and continues in fp32; resume with bf16=true to continue "
                            "under bf16 autocast, which this device runs natively (faster)"), file=sys.stderr)
    return trained and available


def resumed_batch_index(state: dict[str, Any], world: int) -> int:
    """Where each of `world` processes goes on in the saved epoch. Process r of W takes batches r, r+W, ...; after
    `batch_index` steps the W processes have used the epoch's first batch_index*W batches together, so another
    number of processes goes on from the same batch if it divides that count (always so at an epoch boundary)."""
    saved = int(state.get("world", 1))  # states from before the count was saved: single-process runs
    done = state["batch_index"] * saved
    if done % world:
        raise ConfigError(f"latest.pt stopped {done} batches into epoch {state['epoch'] + 1}, trained by {saved} "
                          f"process{'es' if saved > 1 else ''}; {world} processes cannot go on from that batch "
                          f"without repeating or skipping data: resume with {saved} "
                          f"process{'es' if saved > 1 else ''} (or a number that divides {done})")
    return done // world


def train_step(step_fn: nn.Module, optimizer: torch.optim.Optimizer, batch: Batch, lr: float, cfg: TrainConfig,
               params: list[nn.Parameter], autocast: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimisation step on `batch` at learning rate `lr`; returns (loss, nll) per target token as
    detached tensors (reading them forces a device sync, so the caller does it only when it logs)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    with autocast if autocast is not None else nullcontext():
        loss_sum, nll_sum = step_fn(batch.src, batch.tgt_in, batch.tgt_out)
    optimizer.zero_grad(set_to_none=True)
    (loss_sum / batch.target_tokens).backward()
    if cfg.clip_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm)
    optimizer.step()
    return loss_sum.detach() / batch.target_tokens, nll_sum / batch.target_tokens


@dataclass
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def setup_distributed(device_kind: str) -> Distributed:
    """Join the process group when started by torchrun (RANK/WORLD_SIZE set), else a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed()
    backend = "nccl" if device_kind == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' asked for, but torch sees no CUDA GPU")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


class RunLog:
    """Append-only JSON-lines log (only the main process writes)."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path, self.enabled = path, enabled

    def drop_after(self, step: int) -> None:
        """Forget train/val events past `step` (logged after the checkpoint a resumed run restarts from)."""
        if not self.path.is_file():
            return
        kept = [line for line in self.path.read_text(encoding="utf-8").splitlines(keepends=True)
                if not _logged_after(line, step)]
        atomic_write_bytes(self.path, "".join(kept).encode("utf-8"))

    def write(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "time": round(time.time(), 3), **fields}) + "\n")


def _logged_after(line: str, step: int) -> bool:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return True  # a line cut by the kill
    return isinstance(event, dict) and event.get("event") in ("train", "val") and event.get("step", 0) > step


def config_differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the settings that differ between two config dicts."""
    changed = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changed += config_differences(a, b, f"{prefix}{key}.")
        elif _same_tables(a, b):  # e.g. [[corpora]]: name the entry and key that differ
            for x, y in zip(a, b):
                changed += config_differences(x, y, f"{prefix}{key}.{x['name']}.")
        elif a != b:
            changed.append(f"{prefix}{key}")
    return changed


def _same_tables(a: Any, b: Any) -> bool:
    """Whether `a` and `b` are lists of tables with the same names in the same order."""
    return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
            and all(isinstance(x, dict) and isinstance(y, dict) and "name" in x and x.get("name") == y.get("name")
                    for x, y in zip(a, b)))


RESUME_SETTINGS = ("epochs", "cooldown_epochs", "max_steps", "threads", "device", "bf16", "compile",
                   "eval_every_epochs", "eval_bleu_sentences", "eval_beam")
"""What `--resume RUN key=value` may change: how long the run goes on, how it ends and how it runs, never what it
learns from."""


def prepare_run(cfg: TrainConfig | None, run_dir: Path, resume: bool, changes: list[str] | None = None
                ) -> TrainConfig:
    """Check the run directory before anything else; on resume, the saved config is used and any given one must
    equal it (a resume directory from another config is an error that names the differing settings).

    `changes` (``key=value``, resume only) may set the `RESUME_SETTINGS`, e.g. more epochs for a finished run.
    """
    saved = run_dir / CONFIG_FILE
    old: dict[str, Any] | None = None
    if saved.is_file():
        try:
            old = json.loads(saved.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ConfigError(f"{saved}: not valid JSON ({err})") from None
    if changes and not resume:
        raise ConfigError("key=value changes without --config apply to --resume only")
    if resume:
        if old is None:
            raise ConfigError(f"{run_dir}: nothing to resume ({CONFIG_FILE} not found)")
        saved_cfg = TrainConfig.from_dict(old, str(saved))
        if cfg is not None and (changed := config_differences(saved_cfg.to_dict(), cfg.to_dict())):
            raise ConfigError(f"{run_dir} was started with another config (differs in {', '.join(changed)}); "
                              "resume it without --config, or start a new run directory")
        return changed_on_resume(saved_cfg, run_dir, changes) if changes else saved_cfg
    if cfg is None:
        raise ConfigError("a new run needs a config")
    if old is not None:
        if changed := config_differences(old, cfg.to_dict()):
            raise ConfigError(f"{run_dir} already holds a run with another config (differs in {', '.join(changed)});"
                              " use --resume to continue it or choose a new run directory")
        if (run_dir / LATEST).exists():
            raise ConfigError(f"{run_dir} already holds a started run; continue it with --resume")
    return cfg


def changed_on_resume(saved: TrainConfig, run_dir: Path, changes: list[str]) -> TrainConfig:
    """The saved config with `changes` applied, refused where a change is not a `RESUME_SETTINGS` one or would end
    the run before the point it has already reached."""
    data = saved.to_dict()
    for item in changes:
        apply_override(data, item)
    cfg = TrainConfig.from_dict(data, "--resume")
    changed = config_differences(saved.to_dict(), cfg.to_dict())
    if fixed := [k for k in changed if k not in RESUME_SETTINGS]:
        raise ConfigError(f"--resume cannot change {', '.join(fixed)}: it would change what the run learns from "
                          f"(a resume may change only {', '.join(RESUME_SETTINGS)}); start a new run directory, "
                          "warm-started with init_from=MODEL_DIR if you like")
    if not (run_dir / LATEST).exists():
        raise ConfigError(f"{run_dir} has no training state ({LATEST}) to continue with changes; resume it as it is, "
                          "or start a new run directory")
    if "epochs" in changed and cfg.max_steps:
        raise ConfigError(f"this run ends at max_steps={cfg.max_steps}, not after a number of epochs: change "
                          "max_steps, or pass max_steps=0 with epochs")
    state = load_state(run_dir / LATEST, mmap=True)  # only the counters are read
    step, epoch, partial = state["step"], state["epoch"], state["batch_index"] > 0
    if cfg.max_steps and step > cfg.max_steps:
        raise ConfigError(f"the run has already trained {step} steps: max_steps={cfg.max_steps} would end it "
                          "before that")
    if not cfg.max_steps and passed(epoch, partial, cfg.epochs):
        raise ConfigError(f"the run has already trained {trained_epochs(epoch, partial)}: "
                          f"epochs={cfg.epochs} would end it before that")
    check_cooldown_change(saved, cfg, epoch, partial)
    return cfg


def passed(epoch: int, partial: bool, boundary: int) -> bool:
    """Whether a run `epoch` epochs in (and `partial`ly into the next) has trained beyond `boundary` epochs."""
    return epoch > boundary or (epoch == boundary and partial)


def trained_epochs(epoch: int, partial: bool) -> str:
    """How far a run has trained, for error messages: "3 epochs" or "3 and a part epochs"."""
    return f"{epoch}{' and a part' if partial else ''} epochs"


def check_cooldown_change(saved: TrainConfig, cfg: TrainConfig, epoch: int, partial: bool) -> None:
    """A resume may move or add the cooldown only while the run has not reached it (old or new), since the learning
    rate of the steps already taken would otherwise not be the one the new settings give."""
    old, new = cooldown_window(saved), cooldown_window(cfg)
    if old == new:
        return
    for window, which in ((old, "its cooldown"), (new, "the cooldown these settings ask for")):
        if window is not None and passed(epoch, partial, window[0]):
            raise ConfigError(
                f"the run has already trained {trained_epochs(epoch, partial)}, past the start of "
                f"{which} (epochs {window[0] + 1}-{window[1]}): the learning rate it trained with would not be the "
                "one these settings give; resume it with its own epochs and cooldown_epochs")


def load_init(cfg: TrainConfig) -> tuple[Transformer, Tokenizer]:
    """The model and tokenizer of `cfg.init_from`, validated by `load_model_dir` and checked against `cfg.model`.

    The vocabulary size is not compared (as in every run, the tokenizer, here the copied one, sets it), nor are the
    dropout rates: a warm start may regularise differently.
    """
    try:
        model, tokenizer, config = load_model_dir(cfg.init_from)
    except CheckpointError as err:
        raise ConfigError(f"init_from: {err}") from None
    theirs = config.to_dict()
    ours = {**cfg.model.to_dict(), **{k: theirs[k] for k in ("vocab_size", "dropout", "attention_dropout")}}
    if changed := config_differences(theirs, ours):
        raise ConfigError(f"init_from {cfg.init_from}: its model config differs from the run's in "
                          + ", ".join(f"{key} ({theirs[key]!r} there, {ours[key]!r} here)" for key in changed))
    return model, tokenizer


def build_tokenizer(cfg: TrainConfig, run_dir: Path, ctx: Distributed, src: list[str], tgt: list[str],
                    source: Tokenizer | None = None) -> Tokenizer:
    """The run's tokenizer: `source`'s (a warm start) or trained on `src` + `tgt` once, kept in the run directory."""
    path = run_dir / TOKENIZER_FILE
    if ctx.main and source is not None:
        atomic_write_bytes(path, source.serialized())
    elif ctx.main and not path.exists():
        train_tokenizer(src + tgt, path, cfg.vocab_size, cfg.tokenizer_type)
    ctx.barrier()
    return Tokenizer.load(path)


@torch.no_grad()
def validation_loss(model: Transformer, data: EncodedPairs, cfg: TrainConfig, device: torch.device) -> float:
    model.eval()
    total, tokens = 0.0, 0
    objective = LabelSmoothedLoss(model, 0.0)
    for indices in make_batches(data, cfg.batch_tokens, cfg.seed, 0):
        batch = collate(data, indices).to(device)
        _, nll = objective(batch.src, batch.tgt_in, batch.tgt_out)
        total += float(nll)
        tokens += batch.target_tokens
    return total / max(tokens, 1)


LOCK_FILE = "train.lock"


@contextmanager
def run_lock(run_dir: Path, enabled: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on RUN/train.lock while training: a second trainer on the same run directory (e.g. a
    `--resume` while the run still goes on) is an error, not two processes writing one run. The kernel releases
    the lock when the process ends, however it ends, so a killed run never leaves a stale lock."""
    if not enabled:
        yield
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise ConfigError(f"{run_dir} is being trained by another process (pid {holder}); wait for it or stop "
                              "it first, then --resume") from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def train(cfg: TrainConfig | None, run_dir: str | Path, resume: bool = False, changes: list[str] | None = None
          ) -> Path:
    """Train (or continue, with `resume`) the run in `run_dir`; returns the exported model directory.

    On resume `cfg` may be None (the saved config is used); if given, it must equal the saved one. `changes`
    (``key=value``) continue it with other `RESUME_SETTINGS`, e.g. ``epochs=16`` to train a finished run on.
    """
    run_dir = Path(run_dir)
    # first: on resume the saved config (threads, device), with any changes, is the one in force
    cfg = prepare_run(cfg, run_dir, resume, changes)
    device_kind = "cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()) else "cpu"
    ctx = setup_distributed(device_kind)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device, ctx.local_rank)
    resuming = resume and (run_dir / LATEST).exists()
    init = load_init(cfg) if cfg.init_from and not resuming else None  # latest.pt already holds a resumed state
    corpora = load_corpora(cfg)  # everything that can be wrong with the data is found before any training starts
    with run_lock(run_dir, ctx.main):  # from here on the run directory is written: one trainer at a time
        return train_locked(cfg, run_dir, ctx, device, resuming, init, corpora, changes)


def train_locked(cfg: TrainConfig, run_dir: Path, ctx: Distributed, device: torch.device, resuming: bool,
                 init: tuple[Transformer, Tokenizer] | None, corpora: list[Any], changes: list[str] | None) -> Path:
    """`train` once the config, the data and the run directory are checked and the directory is locked."""
    state = load_state(run_dir / LATEST) if resuming else None
    # a position this number of processes cannot go on from is refused before anything in the run is written
    batch_index = resumed_batch_index(state, ctx.world) if state is not None else 0
    training = [c for c in corpora if c.config.trains]
    if ctx.main:
        (run_dir / "epochs").mkdir(exist_ok=True)
        atomic_write_bytes(run_dir / CONFIG_FILE, (json.dumps(cfg.to_dict(), indent=2) + "\n").encode("utf-8"))
    ctx.barrier()
    tokenizer = build_tokenizer(cfg, run_dir, ctx, [s for c in training for s in c.train_src],
                                [t for c in training for t in c.train_tgt],  # the union of the training parts
                                init[1] if init is not None else None)
    if tokenizer.vocab_size != cfg.model.vocab_size:
        cfg = TrainConfig.from_dict({**cfg.to_dict(), "model": {**cfg.model.to_dict(),
                                                               "vocab_size": tokenizer.vocab_size}})
    parts = [encode_pairs(tokenizer, c.train_src, c.train_tgt, cfg.max_len) for c in training]
    train_data = concat_pairs(parts)
    sizes, weights = [len(p) for p in parts], [c.config.weight for c in training]
    val_sets = [ValSet(c.val, encode_pairs(tokenizer, *c.val.pairs(), cfg.max_len)) for c in corpora if c.val]
    eval_sets = [s for c in corpora for s in c.eval_sets]  # scored at the end
    if len(train_data) == 0:
        raise ConfigError("no training pair fits max_len; nothing to train on")
    if len(sample_epoch(sizes, weights, cfg.seed, 0)) == 0:
        raise ConfigError("the corpus weights sample no training pair per epoch; raise a weight")

    def epoch_batches(epoch: int) -> list[list[int]]:
        """The epoch's weighted sample of the corpora in length-grouped batches: a function of (seed, epoch)."""
        pool = sample_epoch(sizes, weights, cfg.seed, epoch)
        return make_batches(train_data, cfg.batch_tokens, cfg.seed, epoch, pool)

    torch.manual_seed(cfg.seed)
    model = Transformer(cfg.model).to(device)
    if init is not None:  # a warm start: the source's weights (fp32 after loading), a fresh optimizer and schedule
        model.load_state_dict(init[0].state_dict())
        init = None
    optimizer = make_optimizer(model, cfg, device)
    step, epoch, wall_before = 0, 0, 0.0
    bf16 = bf16_autocast_used(device, cfg)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, epoch, wall_before = state["step"], state["epoch"], state["wall_time"]
        torch.set_rng_state(state["torch_rng"])
        bf16 = resumed_bf16(state, device, cfg, changes, ctx.main)
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
    if ctx.main:  # forget what was logged after the point the run goes on from (from scratch: step 0)
        RunLog(run_dir / LOG_FILE, True).drop_after(step)
    objective: nn.Module = LabelSmoothedLoss(model, cfg.label_smoothing)
    if ctx.world > 1:
        objective = nn.parallel.DistributedDataParallel(objective, device_ids=[device.index] if device.type == "cuda"
                                                        else None)
    step_fn = torch.compile(objective) if cfg.compile else objective
    params = list(model.parameters())
    autocast = autocast_for(device, bf16)
    precision = "bf16 autocast" if bf16 else "fp32"
    log = RunLog(run_dir / LOG_FILE, ctx.main)
    if ctx.main and step > 0:  # the machine (and with it the precision) may differ from the one that started
        log.write("resume", step=step, device=str(device), world=ctx.world, host=platform.node(),
                  threads=torch.get_num_threads(), precision=precision, changes=list(changes or []))
    if ctx.main and step == 0:
        log.write("start", params=model.num_parameters(), device=str(device), world=ctx.world, precision=precision,
                  train_pairs=len(train_data), val_pairs=sum(len(v.data) for v in val_sets), host=platform.node(),
                  threads=torch.get_num_threads(),
                  corpora=[{"name": c.config.name, "train_pairs": len(p), "weight": c.config.weight}
                           for c, p in zip(training, parts)],
                  epoch_pairs=len(sample_epoch(sizes, weights, cfg.seed, 0)),
                  eval_sets={s.name: {"sentences": len(s.src), "references": s.references} for s in eval_sets})

    # the run ends after `epochs` epochs (or at max_steps when set); with fractional weights epochs differ in size,
    # so the total (progress bar, last log line) is re-estimated at the start of each epoch
    total_steps = cfg.max_steps
    bar = tqdm(total=total_steps or None, initial=step, disable=not ctx.main, dynamic_ncols=True, unit="step")
    started = time.time()
    window_tokens, window_start = 0, time.time()

    def save_latest() -> None:
        """Write latest.pt: everything an exact resume needs, as of now."""
        save_state(run_dir / LATEST, training_state(model, optimizer, step, epoch, batch_index,
                                                    wall_before + time.time() - started, bf16, ctx.world))
    while step < cfg.max_steps if cfg.max_steps else epoch < cfg.epochs:
        batches = epoch_batches(epoch)
        batches = batches[: len(batches) // ctx.world * ctx.world][ctx.rank::ctx.world]
        if not cfg.max_steps:
            total_steps = bar.total = step - batch_index + (cfg.epochs - epoch) * len(batches)
        while batch_index < len(batches) and not (cfg.max_steps and step >= cfg.max_steps):
            model.train()
            batch: Batch = collate(train_data, batches[batch_index]).to(device)
            lr = learning_rate(step + 1, cfg) * cooldown_factor(epoch, batch_index, len(batches), cfg)
            loss, nll = train_step(step_fn, optimizer, batch, lr, cfg, params, autocast)
            step += 1
            batch_index += 1
            window_tokens += batch.target_tokens * ctx.world
            bar.update(1)
            if step % 20 == 0 or step == total_steps:
                elapsed = time.time() - window_start
                tps = window_tokens / max(elapsed, 1e-9)
                loss, nll = float(loss), float(nll)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tps:,.0f}", lr=f"{lr:.2e}", epoch=epoch + 1)
                log.write("train", step=step, epoch=epoch + 1, loss=round(loss, 4),
                          nll=round(nll, 4), lr=lr,
                          tokens_per_s=round(tps, 1),
                          wall_time=round(wall_before + time.time() - started, 1))
                window_tokens, window_start = 0, time.time()
            if step % cfg.checkpoint_every_steps == 0 and ctx.main:
                save_latest()
        if batch_index >= len(batches):  # epoch finished
            epoch += 1
            batch_index = 0
            if ctx.main:
                end_of_epoch(model, tokenizer, cfg, run_dir, epoch, step, val_sets, device, log,
                             wall_before + time.time() - started)
                save_latest()
            ctx.barrier()
    bar.close()
    out_dir = run_dir / "model"
    if ctx.main:
        if (run_dir / LATEST).exists():
            save_latest()
        finish(model, tokenizer, cfg, run_dir, out_dir, eval_sets, device, log)
    ctx.barrier()
    if ctx.world > 1:
        dist.destroy_process_group()
    return out_dir


@dataclass
class ValSet:
    """A validation set: its sentences and references (for BLEU) and its encoded pairs (for the loss)."""

    texts: EvalSet
    data: EncodedPairs

    @property
    def target_tokens(self) -> int:
        return sum(len(t) + 1 for t in self.data.tgt)


def end_of_epoch(model: Transformer, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, epoch: int, step: int,
                 val_sets: list[ValSet], device: torch.device, log: RunLog, wall: float) -> None:
    """Save this epoch's weights (keeping the last K) and log validation loss, BLEU and chrF of every validation set.

    One set (the single-corpus format) logs val_loss / val_bleu / val_chrf; a [[corpora]] run logs them per corpus
    (val_bleu_NAME, ...) and overall: the loss over all sets' target tokens, BLEU and chrF averaged over corpora.
    """
    epochs_dir = run_dir / "epochs"
    save_weights(model, epochs_dir / f"epoch_{epoch:03d}.safetensors")
    for old in sorted(epochs_dir.glob("epoch_*.safetensors"))[:-cfg.keep_epoch_checkpoints]:
        old.unlink()
    fields: dict[str, Any] = {"epoch": epoch, "step": step, "wall_time": round(wall, 1)}
    if cfg.eval_every_epochs and epoch % cfg.eval_every_epochs == 0 and val_sets:
        per_set = []
        for val in val_sets:
            scores = {"loss": validation_loss(model, val.data, cfg, device)}
            if cfg.eval_bleu_sentences:
                scores.update(evaluate_bleu(model, tokenizer, val.texts.head(cfg.eval_bleu_sentences), cfg.eval_beam,
                                            device))
            per_set.append(scores)
        tokens = [v.target_tokens for v in val_sets]
        overall = sum(s["loss"] * n for s, n in zip(per_set, tokens)) / max(sum(tokens), 1)
        fields["val_loss"] = round(per_set[0]["loss"] if len(per_set) == 1 else overall, 4)
        if cfg.eval_bleu_sentences:
            for metric in ("bleu", "chrf"):
                fields[f"val_{metric}"] = round(sum(s[metric] for s in per_set) / len(per_set), 2)
        if cfg.corpora is not None:
            for val, scores in zip(val_sets, per_set):
                fields.update({f"val_{k}_{val.texts.corpus}": round(v, 4 if k == "loss" else 2)
                               for k, v in scores.items()})
        tqdm.write(f"epoch {epoch}: " + ", ".join(f"{k} {v}" for k, v in fields.items() if k.startswith("val")))
    log.write("val", **fields)


def finish(model: Transformer, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, out_dir: Path,
           sets: list[EvalSet], device: torch.device, log: RunLog) -> None:
    """Average the last K epoch checkpoints, score the validation and test sets, export the model directory."""
    checkpoints = sorted((run_dir / "epochs").glob("epoch_*.safetensors"))[-cfg.average_last:]
    if checkpoints:
        average_checkpoints(checkpoints, model)
    model.eval()
    results = evaluate_sets(model, tokenizer, sets, device)
    log.write("test", averaged=[p.name for p in checkpoints], results=results)
    write_model_dir(model, tokenizer, cfg, run_dir, out_dir, results, [p.name for p in checkpoints])
    model.to(device)
