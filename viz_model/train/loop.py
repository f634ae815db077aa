"""The resumable training loop (single process, or DDP under torchrun).

Run directory layout::

    config.json            the resolved TrainConfig
    tokenizer.model        joint SentencePiece model, trained on the training split only
    latest.pt              full training state (model, optimizer, position in the data, RNG), written atomically
    epochs/epoch_NNN.safetensors   weights at the end of each epoch (the last K are kept, then averaged)
    log.jsonl              one JSON object per event: train / val / test
    model/                 the exported, averaged model directory (what `viz_model.load` reads)

Killed at any moment, ``viz-model train --resume RUN_DIR`` continues from ``latest.pt`` with the same model,
optimizer, schedule, data order and RNG state, so the result equals an uninterrupted run.
"""

from __future__ import annotations

import io
import json
import math
import os
import platform
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ..checkpoint import (
    TRAINING_LOG,
    atomic_write_bytes,
    load_weights,
    save_model_dir,
    save_weights,
)
from ..config import ConfigError, TrainConfig
from ..inference import translate_texts
from ..model import Transformer
from ..tokenizer import PAD_ID, Tokenizer, train_tokenizer
from .data import Batch, EncodedPairs, collate, encode_pairs, make_batches, read_parallel
from .evaluate import corpus_scores

CONFIG_FILE, LATEST, TOKENIZER_FILE, LOG_FILE = "config.json", "latest.pt", "tokenizer.model", "log.jsonl"


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """The paper's schedule ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (times lr_scale).

    With ``lr_peak > 0`` the same shape is rescaled so that the peak (at step = warmup) equals lr_peak.
    """
    step = max(step, 1)
    shape = min(step ** -0.5, step * cfg.warmup_steps ** -1.5)
    if cfg.lr_peak > 0:
        return cfg.lr_peak * shape * math.sqrt(cfg.warmup_steps)
    return cfg.lr_scale * cfg.model.d_model ** -0.5 * shape


class LabelSmoothedLoss(nn.Module):
    """Summed label-smoothed cross-entropy over non-padding target positions (projection only where needed)."""

    def __init__(self, model: Transformer, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = self.model.encode(src)
        hidden = self.model.decode(tgt_in, encoded).hidden
        keep = tgt_out != PAD_ID
        logits = self.model.logits(hidden[keep]).float()
        target = tgt_out[keep]
        loss = F.cross_entropy(logits, target, label_smoothing=self.smoothing, reduction="sum")
        nll = F.cross_entropy(logits.detach(), target, reduction="sum")
        return loss, nll


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

    def write(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "time": round(time.time(), 3), **fields}) + "\n")


def prepare_run(cfg: TrainConfig, run_dir: Path, resume: bool) -> TrainConfig:
    """Create or check the run directory; on resume, the saved config wins and must match any given one."""
    saved = run_dir / CONFIG_FILE
    if resume:
        if not saved.is_file():
            raise ConfigError(f"{run_dir}: nothing to resume ({CONFIG_FILE} not found)")
        try:
            old = TrainConfig.from_dict(json.loads(saved.read_text(encoding="utf-8")), str(saved))
        except json.JSONDecodeError as err:
            raise ConfigError(f"{saved}: not valid JSON ({err})") from None
        return old
    if saved.exists():
        old = json.loads(saved.read_text(encoding="utf-8"))
        if old != cfg.to_dict():
            changed = sorted(k for k in set(old) | set(cfg.to_dict()) if old.get(k) != cfg.to_dict().get(k))
            raise ConfigError(f"{run_dir} already holds a run with another config (differs in {changed}); "
                              "use --resume to continue it or choose a new run directory")
        if (run_dir / LATEST).exists():
            raise ConfigError(f"{run_dir} already holds a started run; continue it with --resume")
    return cfg


def build_tokenizer(cfg: TrainConfig, run_dir: Path, ctx: Distributed, src: list[str], tgt: list[str]) -> Tokenizer:
    path = run_dir / TOKENIZER_FILE
    if ctx.main and not path.exists():
        train_tokenizer(src + tgt, path, cfg.vocab_size, cfg.tokenizer_type)
    ctx.barrier()
    return Tokenizer.load(path)


def training_state(model: Transformer, optimizer: torch.optim.Optimizer, step: int, epoch: int, batch_index: int,
                   wall: float) -> dict[str, Any]:
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "epoch": epoch,
             "batch_index": batch_index, "wall_time": wall, "torch_rng": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return state


def save_state(path: Path, state: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_state(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError) as err:
        raise ConfigError(f"{path}: unreadable training state ({err})") from None


def average_checkpoints(paths: list[Path], model: Transformer) -> None:
    """Load into `model` the element-wise mean of the weights in `paths` (paper: last 5 checkpoints)."""
    from safetensors.torch import load_file

    total: dict[str, torch.Tensor] = {}
    for path in paths:
        for name, tensor in load_file(str(path)).items():
            total[name] = total.get(name, 0) + tensor.double()
    averaged = {name: (t / len(paths)).float() for name, t in total.items()}
    tmp = paths[-1].with_name(".average.safetensors")
    from safetensors.torch import save_file

    save_file(averaged, str(tmp))
    load_weights(model, tmp)
    tmp.unlink()


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


def evaluate_bleu(model: Transformer, tokenizer: Tokenizer, src: list[str], ref: list[str], beam: int,
                  device: torch.device) -> dict[str, float]:
    model.eval()
    return corpus_scores(translate_texts(model, tokenizer, src, beam=beam, alpha=0.6, device=device), ref)


def train(cfg: TrainConfig, run_dir: str | Path, resume: bool = False) -> Path:
    """Train (or continue) the run in `run_dir`; returns the exported model directory."""
    run_dir = Path(run_dir)
    device_kind = "cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()) else "cpu"
    ctx = setup_distributed(device_kind)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    cfg = prepare_run(cfg, run_dir, resume)
    device = pick_device(cfg.device, ctx.local_rank)
    # everything that can be wrong with the data is found before any training starts
    train_src, train_tgt = read_parallel(cfg.data_dir, cfg.train_prefix, cfg.src_lang, cfg.tgt_lang)
    val_src, val_tgt = read_parallel(cfg.data_dir, cfg.val_prefix, cfg.src_lang, cfg.tgt_lang)
    if ctx.main:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "epochs").mkdir(exist_ok=True)
        (run_dir / CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2) + "\n", encoding="utf-8")
    ctx.barrier()
    tokenizer = build_tokenizer(cfg, run_dir, ctx, train_src, train_tgt)
    if tokenizer.vocab_size != cfg.model.vocab_size:
        cfg = TrainConfig.from_dict({**cfg.to_dict(), "model": {**cfg.model.to_dict(),
                                                               "vocab_size": tokenizer.vocab_size}})
    train_data = encode_pairs(tokenizer, train_src, train_tgt, cfg.max_len)
    val_data = encode_pairs(tokenizer, val_src, val_tgt, cfg.max_len)
    if len(train_data) == 0:
        raise ConfigError("no training pair fits max_len; nothing to train on")

    torch.manual_seed(cfg.seed)
    model = Transformer(cfg.model).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate(1, cfg), betas=(cfg.adam_beta1, cfg.adam_beta2),
                                 eps=cfg.adam_eps, weight_decay=cfg.weight_decay,
                                 fused=device.type == "cuda" or None)
    step, epoch, batch_index, wall_before = 0, 0, 0, 0.0
    if resume and (run_dir / LATEST).exists():
        state = load_state(run_dir / LATEST)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, epoch, batch_index, wall_before = state["step"], state["epoch"], state["batch_index"], state["wall_time"]
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
    objective: nn.Module = LabelSmoothedLoss(model, cfg.label_smoothing)
    if ctx.world > 1:
        objective = nn.parallel.DistributedDataParallel(objective, device_ids=[device.index] if device.type == "cuda"
                                                        else None)
    step_fn = torch.compile(objective) if cfg.compile else objective
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" and cfg.bf16
                else nullcontext())
    log = RunLog(run_dir / LOG_FILE, ctx.main)
    if ctx.main and step == 0:
        log.write("start", params=model.num_parameters(), device=str(device), world=ctx.world,
                  train_pairs=len(train_data), val_pairs=len(val_data), host=platform.node(),
                  threads=torch.get_num_threads())

    batches_per_epoch = len(make_batches(train_data, cfg.batch_tokens, cfg.seed, 0)) // ctx.world
    total_steps = cfg.max_steps or cfg.epochs * batches_per_epoch
    bar = tqdm(total=total_steps, initial=step, disable=not ctx.main, dynamic_ncols=True, unit="step")
    started = time.time()
    window_tokens, window_start = 0, time.time()
    while step < total_steps and (cfg.max_steps or epoch < cfg.epochs):
        batches = make_batches(train_data, cfg.batch_tokens, cfg.seed, epoch)
        batches = batches[: len(batches) // ctx.world * ctx.world][ctx.rank::ctx.world]
        while batch_index < len(batches) and step < total_steps:
            model.train()
            batch: Batch = collate(train_data, batches[batch_index]).to(device)
            lr = learning_rate(step + 1, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast:
                loss_sum, nll_sum = step_fn(batch.src, batch.tgt_in, batch.tgt_out)
            optimizer.zero_grad(set_to_none=True)
            (loss_sum / batch.target_tokens).backward()
            if cfg.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            optimizer.step()
            step += 1
            batch_index += 1
            window_tokens += batch.target_tokens * ctx.world
            bar.update(1)
            if step % 20 == 0 or step == total_steps:
                elapsed = time.time() - window_start
                tps = window_tokens / max(elapsed, 1e-9)
                loss = float(loss_sum.detach()) / batch.target_tokens
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tps:,.0f}", lr=f"{lr:.2e}", epoch=epoch + 1)
                log.write("train", step=step, epoch=epoch + 1, loss=round(loss, 4),
                          nll=round(float(nll_sum.detach()) / batch.target_tokens, 4), lr=lr,
                          tokens_per_s=round(tps, 1),
                          wall_time=round(wall_before + time.time() - started, 1))
                window_tokens, window_start = 0, time.time()
            if step % cfg.checkpoint_every_steps == 0 and ctx.main:
                save_state(run_dir / LATEST, training_state(model, optimizer, step, epoch, batch_index,
                                                            wall_before + time.time() - started))
        if batch_index >= len(batches):  # epoch finished
            epoch += 1
            batch_index = 0
            if ctx.main:
                end_of_epoch(model, tokenizer, cfg, run_dir, epoch, step, val_data, val_src, val_tgt, device, log,
                             wall_before + time.time() - started)
                save_state(run_dir / LATEST, training_state(model, optimizer, step, epoch, batch_index,
                                                            wall_before + time.time() - started))
            ctx.barrier()
    bar.close()
    out_dir = run_dir / "model"
    if ctx.main:
        if (run_dir / LATEST).exists():
            save_state(run_dir / LATEST, training_state(model, optimizer, step, epoch, batch_index,
                                                        wall_before + time.time() - started))
        finish(model, tokenizer, cfg, run_dir, out_dir, device, log)
    ctx.barrier()
    if ctx.world > 1:
        dist.destroy_process_group()
    return out_dir


def end_of_epoch(model: Transformer, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, epoch: int, step: int,
                 val_data: EncodedPairs, val_src: list[str], val_tgt: list[str], device: torch.device, log: RunLog,
                 wall: float) -> None:
    """Save this epoch's weights (keeping the last K) and log validation loss and BLEU."""
    epochs_dir = run_dir / "epochs"
    save_weights(model, epochs_dir / f"epoch_{epoch:03d}.safetensors")
    for old in sorted(epochs_dir.glob("epoch_*.safetensors"))[:-cfg.keep_epoch_checkpoints]:
        old.unlink()
    fields: dict[str, Any] = {"epoch": epoch, "step": step, "wall_time": round(wall, 1)}
    if cfg.eval_every_epochs and epoch % cfg.eval_every_epochs == 0:
        fields["val_loss"] = round(validation_loss(model, val_data, cfg, device), 4)
        if cfg.eval_bleu_sentences:
            n = cfg.eval_bleu_sentences
            scores = evaluate_bleu(model, tokenizer, val_src[:n], val_tgt[:n], cfg.eval_beam, device)
            fields.update(val_bleu=scores["bleu"], val_chrf=scores["chrf"])
        tqdm.write(f"epoch {epoch}: " + ", ".join(f"{k} {v}" for k, v in fields.items() if k.startswith("val")))
    log.write("val", **fields)


def finish(model: Transformer, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, out_dir: Path,
           device: torch.device, log: RunLog) -> None:
    """Average the last K epoch checkpoints, export the model directory and score the test sets."""
    checkpoints = sorted((run_dir / "epochs").glob("epoch_*.safetensors"))[-cfg.average_last:]
    if checkpoints:
        average_checkpoints(checkpoints, model)
    model.eval()
    results: dict[str, dict[str, float]] = {}
    for prefix in (cfg.val_prefix, *cfg.test_prefixes):
        try:
            src, ref = read_parallel(cfg.data_dir, prefix, cfg.src_lang, cfg.tgt_lang)
        except ValueError as err:
            tqdm.write(f"skipping {prefix}: {err}")
            continue
        for beam in (1, 4):
            scores = evaluate_bleu(model, tokenizer, src, ref, beam, device)
            results[f"{prefix}/beam{beam}"] = scores
            tqdm.write(f"{prefix} beam {beam}: BLEU {scores['bleu']}, chrF {scores['chrf']}")
    log.write("test", averaged=[p.name for p in checkpoints], results=results)
    save_model_dir(model.cpu(), tokenizer, out_dir)
    (out_dir / TRAINING_LOG).write_bytes((run_dir / LOG_FILE).read_bytes())
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    model.to(device)
