"""Training a shared run, reading run logs, comparing training states, and killing a run at a chosen moment."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from viz_model.config import TrainConfig
from viz_model.modeldir import checkpoint
from viz_model.train import loop


def trained_run(run_dir: Path, cfg: TrainConfig) -> Path:
    """`run_dir` after a run of `cfg` trained to its end: what a shared run fixture holds."""
    loop.train(cfg, run_dir)
    return run_dir


def read_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]


# --- resume: a killed run continued with --resume equals an uninterrupted one ---------------------
class Killed(BaseException):
    """Stands for SIGKILL / Ctrl-C: not an Exception, so nothing in the loop may swallow it."""


def fresh_run_dir(path: Path, tokenizer_from: Path) -> Path:
    """A new run directory that already holds the reference run's tokenizer (SentencePiece training is not
    bit-reproducible across runs; resuming reuses the run's own tokenizer anyway)."""
    path.mkdir(parents=True)
    shutil.copyfile(tokenizer_from / "tokenizer.model", path / "tokenizer.model")
    return path


def assert_same_training_state(a: Path, b: Path) -> None:
    sa, sb = torch.load(a / "latest.pt", weights_only=True), torch.load(b / "latest.pt", weights_only=True)
    assert (sa["step"], sa["epoch"], sa["batch_index"]) == (sb["step"], sb["epoch"], sb["batch_index"])
    for name in sa["model"]:
        assert torch.equal(sa["model"][name], sb["model"][name]), name
    opt_a, opt_b = sa["optimizer"]["state"], sb["optimizer"]["state"]
    assert opt_a.keys() == opt_b.keys()
    for key in opt_a:
        for field in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt_a[key][field], opt_b[key][field]), (key, field)
    assert torch.equal(sa["torch_rng"], sb["torch_rng"])
    kept = sorted(p.relative_to(a).as_posix() for p in (a / "epochs").glob("epoch_*.safetensors"))
    assert kept == sorted(p.relative_to(b).as_posix() for p in (b / "epochs").glob("epoch_*.safetensors"))
    for name in (*kept, "model/model.safetensors"):
        ta, tb = load_file(str(a / name)), load_file(str(b / name))
        assert ta.keys() == tb.keys()
        for key in ta:
            assert torch.equal(ta[key], tb[key]), (name, key)


def kill_at_step(monkeypatch, k: int) -> None:
    """Kill the run in the middle of training step k (after the checkpoint before it, before its update)."""
    real = loop.learning_rate

    def learning_rate_or_die(step, cfg):
        if step == k:
            raise Killed(f"killed at step {k}")
        return real(step, cfg)

    monkeypatch.setattr(loop, "learning_rate", learning_rate_or_die)


def kill_while_writing_latest(monkeypatch, nth: int) -> None:
    """Kill the run inside the nth write of latest.pt, after the bytes went to a temporary file."""
    real, calls = os.replace, []

    def replace_or_die(src, dst, *args, **kwargs):
        if str(dst).endswith("latest.pt"):
            calls.append(dst)
            if len(calls) == nth:
                raise Killed("killed while writing latest.pt")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(checkpoint.os, "replace", replace_or_die)


def kill_in_end_of_epoch(monkeypatch) -> None:
    """Kill the run after the first epoch's weights were saved but before its validation (and latest.pt)."""
    def die(*args, **kwargs):
        raise Killed("killed during validation")

    monkeypatch.setattr(loop, "validation_loss", die)
