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

import json
import platform
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from ..config import ConfigError, TrainConfig
from ..config.recipe import cooldown_factor, learning_rate
from ..data.shard import Distributed, setup_distributed
from ..modeldir.checkpoint import atomic_write_bytes, load_tokenizer, network_class, save_weights
from ..nn.model import Transformer
from ..tokenization.encoder_tokenizer import RULES, EncoderTokenizer
from ..tokenization.tokenizer import Tokenizer, train_tokenizer
from ..tokenization.wordpiece import train_wordpiece
from .checkpoints import (
    CONFIG_FILE,
    LATEST,
    LOG_FILE,
    TOKENIZER_FILE,
    average_checkpoints,
    load_state,
    save_series_step,
    save_state,
    training_state,
)
from .corpora import load_corpora
from .data import (
    Batch,
    EncodedPairs,
    EvalSet,
    concat_pairs,
    encode_lines,
    encode_pairs,
    encode_texts,
    make_batches,
    sample_epoch,
)
from .evaluate import evaluate_bleu
from .export import evaluate_sets, write_model_dir
from .mlm_objective import TRAINING
from .objectives import Network, make_batch, mean_nll, objective
from .packing import pack_texts
from .resume import load_init, prepare_run, resumed_batch_index, resumed_bf16, run_lock
from .runtime import autocast_for, bf16_autocast_used, pick_device


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Adam:
    """Adam(beta1, beta2, eps) as in the paper: the fused kernel on CUDA, elsewhere the foreach one (one C++ loop over
    the parameters per update, not a Python one: the same numbers)."""
    kernel = {"fused": True} if device.type == "cuda" else {"foreach": True}
    return torch.optim.Adam(model.parameters(), lr=learning_rate(1, cfg), betas=(cfg.adam_beta1, cfg.adam_beta2),
                            eps=cfg.adam_eps, weight_decay=cfg.weight_decay, **kernel)


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


def build_tokenizer(cfg: TrainConfig, run_dir: Path, ctx: Distributed, src: list[str], tgt: list[str],
                    source: Tokenizer | None = None) -> Tokenizer | EncoderTokenizer:
    """The run's tokenizer: `source`'s (a warm start) or trained on `src` + `tgt` once, kept in the run directory
    (an encoder's: a WordPiece vocabulary, `train_wordpiece`)."""
    if cfg.model.kind == "encoder":
        if ctx.main and not (run_dir / RULES).exists():  # its rules file is written last
            train_wordpiece(src + tgt, cfg.vocab_size, run_dir)
        ctx.barrier()
        return load_tokenizer(run_dir)[0]  # type: ignore[return-value]
    path = run_dir / TOKENIZER_FILE
    if ctx.main and source is not None:
        atomic_write_bytes(path, source.serialized())
    elif ctx.main and not path.exists():
        train_tokenizer(src + tgt, path, cfg.vocab_size, cfg.tokenizer_type)
    ctx.barrier()
    return Tokenizer.load(path)


def validation_loss(model: Network, data: EncodedPairs, cfg: TrainConfig, device: torch.device) -> float:
    """The validation set's negative log-likelihood per target token."""
    return mean_nll(model, data, cfg.batch_tokens, cfg.seed, device)


def encode_part(cfg: TrainConfig, tokenizer: Tokenizer, src: list[str], tgt: list[str]) -> EncodedPairs:
    """A part of the data as the run's model reads it: sentence pairs, or (a decoder-only or encoder-only run) the
    text lines."""
    if cfg.model.kind == "decoder":
        return encode_texts(tokenizer, tgt, cfg.max_len)
    if cfg.model.kind == "encoder":
        return encode_lines(tokenizer, tgt, cfg.max_len)
    return encode_pairs(tokenizer, src, tgt, cfg.max_len)


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
    if ctx.main:
        (run_dir / "epochs").mkdir(exist_ok=True)
        atomic_write_bytes(run_dir / CONFIG_FILE, (json.dumps(cfg.to_dict(), indent=2) + "\n").encode("utf-8"))
    ctx.barrier()
    cfg, data = prepare_data(cfg, run_dir, ctx, corpora, init[1] if init is not None else None)
    run = start_or_restore(cfg, device, init[0] if init is not None else None, state, changes, ctx)
    run.progress.batch_index = batch_index
    if ctx.main:  # forget what was logged after the point the run goes on from (from scratch: step 0)
        RunLog(run_dir / LOG_FILE, True).drop_after(run.progress.step)
    log = RunLog(run_dir / LOG_FILE, ctx.main)
    log_start(log, run, data, cfg, device, ctx, changes)
    train_epochs(cfg, run_dir, ctx, device, data, run, log)
    out_dir = run_dir / "model"
    if ctx.main:
        if (run_dir / LATEST).exists():
            run.save_latest(run_dir)
        finish(run.model, data.tokenizer, cfg, run_dir, out_dir, data.eval_sets, device, log)
    ctx.barrier()
    if ctx.world > 1:
        dist.destroy_process_group()
    return out_dir


@dataclass
class RunData:
    """The run's tokenizer and encoded data: the training parts of every corpus, validation and evaluation sets."""

    tokenizer: Tokenizer
    parts: list[EncodedPairs]  # per training corpus
    names: list[str]
    weights: list[float]
    train: EncodedPairs  # the parts concatenated
    val_sets: list[ValSet]
    eval_sets: list[EvalSet]  # scored at the end

    def epoch_batches(self, cfg: TrainConfig, epoch: int) -> list[list[int]]:
        """The epoch's weighted sample of the corpora in length-grouped batches: a function of (seed, epoch)."""
        pool = sample_epoch([len(p) for p in self.parts], self.weights, cfg.seed, epoch)
        return make_batches(self.train, cfg.batch_tokens, cfg.seed, epoch, pool)


def prepare_data(cfg: TrainConfig, run_dir: Path, ctx: Distributed, corpora: list[Any],
                 init_tokenizer: Tokenizer | None) -> tuple[TrainConfig, RunData]:
    """The tokenizer (trained on the union of the training parts, or the warm start's), the config with its
    vocabulary size, and the encoded data; refused when nothing would be trained on."""
    training = [c for c in corpora if c.config.trains]
    texts = cfg.model.kind != "seq2seq"  # its sources are its targets: the tokenizer learns each line once
    tokenizer = build_tokenizer(cfg, run_dir, ctx, [s for c in training for s in c.train_src],
                                [] if texts else [t for c in training for t in c.train_tgt], init_tokenizer)
    if tokenizer.vocab_size != cfg.model.vocab_size:
        cfg = TrainConfig.from_dict({**cfg.to_dict(), "model": {**cfg.model.to_dict(),
                                                               "vocab_size": tokenizer.vocab_size}})
    parts = [encode_part(cfg, tokenizer, c.train_src, c.train_tgt) for c in training]
    if cfg.pack_len:
        parts = [pack_texts(part, cfg.pack_len, cfg.pack_repeat, cfg.seed, cfg.pack_spans, cfg.model.vocab_size)
                 for part in parts]
    data = RunData(tokenizer, parts, [c.config.name for c in training], [c.config.weight for c in training],
                   concat_pairs(parts),
                   [ValSet(c.val, encode_part(cfg, tokenizer, *c.val.pairs())) for c in corpora if c.val],
                   [s for c in corpora for s in c.eval_sets])
    if len(data.train) == 0:
        raise ConfigError(f"no training {'line' if texts else 'pair'} fits max_len; nothing to train on")
    if len(sample_epoch([len(p) for p in parts], data.weights, cfg.seed, 0)) == 0:
        raise ConfigError("the corpus weights sample no training pair per epoch; raise a weight")
    return cfg, data


@dataclass
class Progress:
    """Where the run is: optimizer steps, finished epochs, the next batch of the epoch, wall time before this
    process started."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0
    wall_before: float = 0.0
    started: float = field(default_factory=time.time)

    @property
    def wall(self) -> float:
        return self.wall_before + time.time() - self.started


@dataclass
class Run:
    """The model and optimizer being trained, the precision and where the run is."""

    model: Network
    optimizer: torch.optim.Optimizer
    progress: Progress
    bf16: bool
    world: int

    def save_latest(self, run_dir: Path) -> None:
        """Write latest.pt: everything an exact resume needs, as of now."""
        p = self.progress
        save_state(run_dir / LATEST, training_state(self.model, self.optimizer, p.step, p.epoch, p.batch_index,
                                                    p.wall, self.bf16, self.world))


def start_or_restore(cfg: TrainConfig, device: torch.device, init: Transformer | None, state: dict[str, Any] | None,
                     changes: list[str] | None, ctx: Distributed) -> Run:
    """A fresh model (seeded; or the warm start's weights) and optimizer, or those of `state` with its step, epoch,
    RNG and precision."""
    torch.manual_seed(cfg.seed)
    model = network_class(cfg.model)(cfg.model).to(device)
    if init is not None:  # a warm start: the source's weights (fp32 after loading), a fresh optimizer and schedule
        model.load_state_dict(init.state_dict())
    optimizer = make_optimizer(model, cfg, device)
    run = Run(model, optimizer, Progress(), bf16_autocast_used(device, cfg), ctx.world)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        run.progress = Progress(state["step"], state["epoch"], 0, state["wall_time"])
        torch.set_rng_state(state["torch_rng"])
        run.bf16 = resumed_bf16(state, device, cfg, changes, ctx.main)
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
    return run


def log_start(log: RunLog, run: Run, data: RunData, cfg: TrainConfig, device: torch.device, ctx: Distributed,
              changes: list[str] | None) -> None:
    """The log's "start" event (a new run) or "resume" event: the machine and with it the precision may differ."""
    precision = "bf16 autocast" if run.bf16 else "fp32"
    if run.progress.step > 0:
        log.write("resume", step=run.progress.step, device=str(device), world=ctx.world, host=platform.node(),
                  threads=torch.get_num_threads(), precision=precision, changes=list(changes or []))
        return
    log.write("start", params=run.model.num_parameters(), device=str(device), world=ctx.world, precision=precision,
              train_pairs=len(data.train), val_pairs=sum(len(v.data) for v in data.val_sets), host=platform.node(),
              threads=torch.get_num_threads(),
              corpora=[{"name": name, "train_pairs": len(part), "weight": weight}
                       for name, part, weight in zip(data.names, data.parts, data.weights)],
              epoch_pairs=len(sample_epoch([len(p) for p in data.parts], data.weights, cfg.seed, 0)),
              eval_sets={s.name: {"sentences": len(s.src), "references": s.references} for s in data.eval_sets})


def train_epochs(cfg: TrainConfig, run_dir: Path, ctx: Distributed, device: torch.device, data: RunData, run: Run,
                 log: RunLog) -> None:
    """Train until `epochs` epochs (or max_steps when set), logging every 20 steps, saving latest.pt every
    `checkpoint_every_steps` and at each epoch's end. With fractional corpus weights epochs differ in size, so the
    total (progress bar, last log line) is re-estimated at the start of each epoch."""
    loss: nn.Module = objective(run.model, cfg.label_smoothing)
    if ctx.world > 1:
        loss = nn.parallel.DistributedDataParallel(loss, device_ids=[device.index] if device.type == "cuda" else None)
    step_fn = torch.compile(loss) if cfg.compile else loss
    params = list(run.model.parameters())
    autocast = autocast_for(device, run.bf16)
    p = run.progress
    total_steps = cfg.max_steps
    bar = tqdm(total=total_steps or None, initial=p.step, disable=not ctx.main, dynamic_ncols=True, unit="step")
    window_tokens, window_start = 0, time.time()
    if cfg.series_every_steps and p.step == 0 and ctx.main:
        save_series_step(run.model, data.tokenizer, run_dir, 0)  # the series starts at the initialisation
    while p.step < cfg.max_steps if cfg.max_steps else p.epoch < cfg.epochs:
        batches = data.epoch_batches(cfg, p.epoch)
        batches = batches[: len(batches) // ctx.world * ctx.world][ctx.rank::ctx.world]
        if not cfg.max_steps:
            total_steps = bar.total = p.step - p.batch_index + (cfg.epochs - p.epoch) * len(batches)
        while p.batch_index < len(batches) and not (cfg.max_steps and p.step >= cfg.max_steps):
            run.model.train()
            batch: Batch = make_batch(run.model, data.train, batches[p.batch_index], cfg.seed, TRAINING, p.epoch,
                                      p.batch_index).to(device)
            lr = learning_rate(p.step + 1, cfg) * cooldown_factor(p.epoch, p.batch_index, len(batches), cfg)
            loss, nll = train_step(step_fn, run.optimizer, batch, lr, cfg, params, autocast)
            p.step += 1
            p.batch_index += 1
            window_tokens += batch.target_tokens * ctx.world
            bar.update(1)
            if p.step % 20 == 0 or p.step == total_steps:
                tps = window_tokens / max(time.time() - window_start, 1e-9)
                loss, nll = float(loss), float(nll)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tps:,.0f}", lr=f"{lr:.2e}", epoch=p.epoch + 1)
                log.write("train", step=p.step, epoch=p.epoch + 1, loss=round(loss, 4), nll=round(nll, 4), lr=lr,
                          tokens_per_s=round(tps, 1), wall_time=round(p.wall, 1))
                window_tokens, window_start = 0, time.time()
            if cfg.series_every_steps and p.step % cfg.series_every_steps == 0 and ctx.main:
                save_series_step(run.model, data.tokenizer, run_dir, p.step)
            if p.step % cfg.checkpoint_every_steps == 0 and ctx.main:
                run.save_latest(run_dir)
        if p.batch_index >= len(batches):  # epoch finished
            p.epoch += 1
            p.batch_index = 0
            if ctx.main:
                end_of_epoch(run.model, data.tokenizer, cfg, run_dir, p.epoch, p.step, data.val_sets, device, log,
                             p.wall)
                run.save_latest(run_dir)
            ctx.barrier()
    bar.close()


@dataclass
class ValSet:
    """A validation set: its sentences and references (for BLEU) and its encoded pairs (for the loss)."""

    texts: EvalSet
    data: EncodedPairs

    @property
    def target_tokens(self) -> int:
        return sum(len(t) + 1 for t in self.data.tgt)


def end_of_epoch(model: Network, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, epoch: int, step: int,
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
    bleu = cfg.eval_bleu_sentences and cfg.model.kind == "seq2seq"  # a language model is scored by its loss alone
    if cfg.eval_every_epochs and epoch % cfg.eval_every_epochs == 0 and val_sets:
        per_set = []
        for val in val_sets:
            scores = {"loss": validation_loss(model, val.data, cfg, device)}
            if bleu:
                scores.update(evaluate_bleu(model, tokenizer, val.texts.head(cfg.eval_bleu_sentences), cfg.eval_beam,
                                            device))
            per_set.append(scores)
        tokens = [v.target_tokens for v in val_sets]
        overall = sum(s["loss"] * n for s, n in zip(per_set, tokens)) / max(sum(tokens), 1)
        fields["val_loss"] = round(per_set[0]["loss"] if len(per_set) == 1 else overall, 4)
        if bleu:
            for metric in ("bleu", "chrf"):
                fields[f"val_{metric}"] = round(sum(s[metric] for s in per_set) / len(per_set), 2)
        if cfg.corpora is not None:
            for val, scores in zip(val_sets, per_set):
                fields.update({f"val_{k}_{val.texts.corpus}": round(v, 4 if k == "loss" else 2)
                               for k, v in scores.items()})
        tqdm.write(f"epoch {epoch}: " + ", ".join(f"{k} {v}" for k, v in fields.items() if k.startswith("val")))
    log.write("val", **fields)


def finish(model: Network, tokenizer: Tokenizer, cfg: TrainConfig, run_dir: Path, out_dir: Path,
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
