"""The run-directory policy: what a new run, a resume and a resume with changes may do, checked before anything is
written; the lock that keeps one trainer per run; and how a resumed run picks up its precision and position."""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from ..config import ConfigError, TrainConfig, apply_override
from ..config.recipe import cooldown_window
from ..modeldir.checkpoint import CheckpointError, load_model_dir
from ..nn.model import Transformer
from ..tokenization.tokenizer import Tokenizer
from .checkpoints import CONFIG_FILE, LATEST, load_state
from .runtime import bf16_autocast_used


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
