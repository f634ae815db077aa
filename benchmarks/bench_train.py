#!/usr/bin/env python
"""Training throughput: our trainer's step against a naive ``torch.nn.Transformer`` loop, same batches, one run.

Throughput is non-padding target tokens per second of wall time for a full training step: forward, loss,
backward and the Adam update (and the host-to-device copy of the batch). The two systems get the *same* batches
(Multi30K training pairs tokenized with an 8k joint BPE, grouped by length with ``make_batches`` into batches of
about ``--batch-tokens`` padded tokens per side, ``collate``'d once up front) and the same seed, and their steps
alternate batch by batch (who goes first alternates too), so background load on the machine hits both alike.

* **ours**: what ``viz_model.train.loop.train`` does per step: ``LabelSmoothedLoss(Transformer)`` (fused SDPA
  attention, the output projection only on non-padding positions, label smoothing 0.1, summed then divided by the
  batch's target tokens), ``zero_grad(set_to_none=True)``, ``backward``, ``Adam(0.9, 0.98, 1e-9)`` (fused on CUDA),
  the learning rate set every step. Under bf16 autocast where the trainer uses it (``bf16 = true``, the default:
  on CUDA, and on CPUs that multiply bf16 natively, AVX512-BF16 or AMX; fp32 elsewhere); ``--compile`` wraps the
  objective in ``torch.compile`` as ``compile = true`` does.
* **baseline**: what one writes first with ``torch.nn.Transformer``: shared embedding * sqrt(d_model) + sinusoidal
  PE + dropout, ``nn.Transformer(batch_first=True)`` (post-LN, ReLU, dropout 0.1 everywhere it puts dropout),
  boolean causal and padding masks, the tied full-vocabulary output projection over every position (padding
  included), ``CrossEntropyLoss(ignore_index=pad, label_smoothing=0.1)``, plain ``Adam`` with the same betas/eps and
  learning rate. fp32 (``--baseline-bf16`` gives it bf16 autocast too, where ours has it).

Targets: >= 1.5x the baseline on this CPU; on an H100, >= 1,000,000 tokens/s for the shipped model's size (a naive
loop managed about 90k). Figures are only meaningful on an idle machine.

    python benchmarks/bench_train.py                  # CPU: 30 timed steps each after 3 warm-up steps
    python benchmarks/bench_train.py --json           # the same, JSON on stdout (the table goes to stderr)
    python benchmarks/bench_train.py --quick          # smoke test: 3 timed steps each
    python benchmarks/bench_train.py --device cuda --data-dir .data/multi30k --steps 200 --warmup 20
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_common import REFERENCE_DIMS, REPO, CpuMonitor, cached_tokenizer, data_label, describe_machine, emit, machine
from torch import nn

from viz_model.config import ModelConfig, TrainConfig
from viz_model.config.data_root import data_root
from viz_model.data.textfiles import read_parallel
from viz_model.nn.model import Transformer
from viz_model.nn.positional import sinusoidal_table
from viz_model.tokenization.tokenizer import EOS_ID, Tokenizer
from viz_model.train.data import Batch, EncodedPairs, collate, encode_pairs, make_batches
from viz_model.train.loop import learning_rate, make_optimizer, train_step
from viz_model.train.objectives import LabelSmoothedLoss
from viz_model.train.runtime import autocast_for, bf16_autocast_used, native_bf16

DEFAULT_CONFIG = REPO / "configs" / "multi30k-en-de.toml"
TARGET_CPU_RATIO = 1.5
TARGET_H100_TOKENS = 1_000_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Training tokens/s (non-padding target tokens, full step incl. backward and Adam) of "
                    "viz_model's trainer step vs a naive torch.nn.Transformer loop on the same batches.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data-dir", type=Path, default=data_root() / "multi30k",
                   help="Multi30K directory (train.en[.gz], train.de[.gz])")
    p.add_argument("--tokenizer", type=Path, help="SentencePiece model (default: train an 8k joint BPE on the "
                                                  "training split once, cached in .data/bench)")
    p.add_argument("--synthetic", action="store_true",
                   help="no data: random ids with Multi30K-like lengths (source ~15.7, target ~18.2 tokens)")
    p.add_argument("--config", type=Path, help="take the model dimensions and the recipe (lr, warm-up, "
                                               "max_len) from this training config (TOML); default: "
                                               "d_model 256, 3+3 layers, 8 heads, d_ff 1024, 8k vocab")
    p.add_argument("--steps", type=int, default=30, help="timed steps of each system")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps of each system")
    p.add_argument("--batch-tokens", type=int, default=4000, help="padded tokens per batch and side (make_batches)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    p.add_argument("--no-bf16", action="store_true", help="ours in fp32 (no bf16 autocast, as bf16 = false)")
    p.add_argument("--baseline-bf16", action="store_true",
                   help="the baseline under bf16 autocast too (where ours has it: CUDA, CPUs with native bf16)")
    p.add_argument("--compile", action="store_true", help="torch.compile our objective (trainer's compile=true)")
    p.add_argument("--quick", action="store_true", help="smoke test: 3 timed steps, 1 warm-up")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.warmup = min(args.steps, 3), min(args.warmup, 1)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    return args


# --- data --------------------------------------------------------------------------------------------------------
def synthetic_pairs(vocab_size: int, seed: int, n: int = 29_000) -> EncodedPairs:
    """Random ids with Multi30K-like lengths (unigram 8k: 14.7 source and 17.2 target pieces on average)."""
    rng = np.random.default_rng(seed)
    src_len = np.clip(np.rint(rng.normal(14.7, 4.5, n)), 3, 60).astype(int)
    tgt_len = np.clip(np.rint(rng.normal(17.2, 5.0, n)), 3, 60).astype(int)
    src = [rng.integers(4, vocab_size, s).tolist() + [EOS_ID] for s in src_len]
    tgt = [rng.integers(4, vocab_size, t).tolist() for t in tgt_len]
    return EncodedPairs(src, tgt)


def load_data(args: argparse.Namespace, vocab_size: int, max_len: int) -> tuple[EncodedPairs, int, str]:
    """(pairs, vocabulary size, description)."""
    if args.synthetic:
        return synthetic_pairs(vocab_size, args.seed), vocab_size, "synthetic (random ids, Multi30K-like lengths)"
    hint = "Pass --data-dir DIR (Multi30K) or --synthetic"
    tokenizer = Tokenizer.load(args.tokenizer or cached_tokenizer(args.data_dir, vocab_size, hint))
    src, tgt = read_parallel(args.data_dir, "train", "en", "de")
    data = encode_pairs(tokenizer, src, tgt, max_len)
    return data, tokenizer.vocab_size, f"Multi30K train ({data_label(args.data_dir)}), {len(data)} pairs, " \
                                       f"tokenizer {Path(tokenizer.path or '').name} ({tokenizer.vocab_size} pieces)"


# --- the naive baseline ----------------------------------------------------------------------------------------------
class NaiveTransformer(nn.Module):
    """The textbook model on ``torch.nn.Transformer``: same sizes, same 3-way tied embeddings as ours."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.d_model, self.pad_id = cfg.d_model, cfg.pad_id
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        nn.init.normal_(self.embedding.weight, std=cfg.d_model ** -0.5)
        self.register_buffer("pe", sinusoidal_table(cfg.max_positions, cfg.d_model), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.transformer = nn.Transformer(cfg.d_model, cfg.heads, cfg.encoder_layers, cfg.decoder_layers, cfg.d_ff,
                                          cfg.dropout, batch_first=True)
        self.generator = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.generator.weight = self.embedding.weight  # tied, like ours (same parameter count, same Adam work)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embedding(ids) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        length = tgt_in.shape[1]
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool, device=src.device), diagonal=1)
        src_pad, tgt_pad = src == self.pad_id, tgt_in == self.pad_id  # True = ignore (nn.Transformer's convention)
        hidden = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src_pad,
                                  tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.generator(hidden)  # (batch, tgt_len, vocab): every position, padding included


# --- the two steps ---------------------------------------------------------------------------------------------------
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_ours(cfg: ModelConfig, train_cfg: TrainConfig, device: torch.device, bf16: bool, compile_: bool
              ) -> tuple[Callable[[Batch, int], torch.Tensor], nn.Module]:
    """The trainer's step (viz_model.train.loop.train), as a function of (batch on CPU, step number)."""
    torch.manual_seed(train_cfg.seed)
    model = Transformer(cfg).to(device)
    optimizer = make_optimizer(model, train_cfg, device)
    objective = LabelSmoothedLoss(model, train_cfg.label_smoothing)
    step_fn = torch.compile(objective) if compile_ else objective
    autocast = autocast_for(device, bf16)
    params = list(model.parameters())

    def step(cpu_batch: Batch, number: int) -> torch.Tensor:
        model.train()
        loss, _ = train_step(step_fn, optimizer, cpu_batch.to(device), learning_rate(number, train_cfg), train_cfg,
                             params, autocast)
        return loss

    return step, model


def make_baseline(cfg: ModelConfig, train_cfg: TrainConfig, device: torch.device, bf16: bool
                  ) -> tuple[Callable[[Batch, int], torch.Tensor], nn.Module]:
    torch.manual_seed(train_cfg.seed)
    model = NaiveTransformer(cfg).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate(1, train_cfg),
                                 betas=(train_cfg.adam_beta1, train_cfg.adam_beta2), eps=train_cfg.adam_eps)
    criterion = nn.CrossEntropyLoss(ignore_index=cfg.pad_id, label_smoothing=train_cfg.label_smoothing)
    autocast = autocast_for(device, bf16)  # the same autocast as ours

    def step(cpu_batch: Batch, number: int) -> torch.Tensor:
        model.train()
        batch = cpu_batch.to(device)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(number, train_cfg)
        with autocast:
            logits = model(batch.src, batch.tgt_in)
            loss = criterion(logits.reshape(-1, logits.shape[-1]).float(), batch.tgt_out.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, model


# --- measurement ---------------------------------------------------------------------------------------------------
def run_interleaved(steps: dict[str, Callable[[Batch, int], Any]], batches: list[Batch], warmup: int,
                    device: torch.device, progress: bool) -> dict[str, dict[str, Any]]:
    """Both systems step through the same batches; on each batch they alternate who goes first."""
    names = list(steps)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    tokens: list[int] = []
    losses: dict[str, float] = {}
    for i, batch in enumerate(batches):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            sync(device)
            start = time.perf_counter()
            loss = steps[name](batch, i + 1)
            sync(device)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                seconds[name].append(elapsed)
            losses[name] = float(loss)
        if i >= warmup:
            tokens.append(batch.target_tokens)
        if progress:
            phase = "warm-up" if i < warmup else "timed"
            print(f"\r  batch {i + 1}/{len(batches)} ({phase})", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    out = {}
    for name in names:
        total = sum(seconds[name])
        per_step = np.asarray(seconds[name]) * 1000
        out[name] = {"tokens_per_s": round(sum(tokens) / total, 1), "seconds": round(total, 3),
                     "step_ms_p50": round(float(np.percentile(per_step, 50)), 1),
                     "step_ms_p90": round(float(np.percentile(per_step, 90)), 1),
                     "last_loss": round(losses[name], 4), "finite": math.isfinite(losses[name])}
    return out


def table(r: dict[str, Any]) -> str:
    cfg = r["config"]
    lines = [f"bench_train: training tokens/s (non-padding target tokens, full step incl. backward + Adam), "
             f"{r['device']} ({r['device_name']}), {r['threads']} torch threads (torch {r['torch']}, "
             f"{describe_machine(r['machine'])})",
             f"model: d_model {cfg['d_model']}, {cfg['encoder_layers']}+{cfg['decoder_layers']} layers, "
             f"{cfg['heads']} heads, d_ff {cfg['d_ff']}, vocab {cfg['vocab_size']}, dropout {cfg['dropout']}; "
             f"ours {r['params_ours'] / 1e6:.2f}M parameters, baseline {r['params_baseline'] / 1e6:.2f}M",
             f"data: {r['data']}",
             f"batches: {r['steps']} timed + {r['warmup']} warm-up, ~{r['batch_tokens']} padded tokens per side, "
             f"{r['timed_target_tokens']:,} target tokens timed ({r['padding_share']:.0%} of target positions are "
             "padding); same batches and seed for both, steps alternate",
             f"precision: ours {r['precision_ours']}, baseline {r['precision_baseline']}"
             + (", ours under torch.compile" if r["compile"] else ""),
             f"other processes kept {r['other_cores']} of {os.cpu_count()} CPUs busy meanwhile"]
    if r["busy"]:
        lines.append("WARNING: the machine was busy during the run: the figures are low and noisy; measure on an "
                     "idle machine" + (" (with several torch threads on a busy machine, OpenMP threads wait on "
                                       "each other: --threads 1 is steadier)" if r["threads"] > 1 else ""))
    lines.append("")
    lines.append(f"{'':40}{'tokens/s':>11}{'step p50 ms':>13}{'step p90 ms':>13}{'last loss':>11}")
    for name, label in (("ours", "viz_model trainer step"), ("baseline", "naive nn.Transformer loop")):
        s = r[name]
        lines.append(f"{label:40}{s['tokens_per_s']:>11,.0f}{s['step_ms_p50']:>13.1f}{s['step_ms_p90']:>13.1f}"
                     f"{s['last_loss']:>11.3f}")
    lines.append(f"{'ratio (ours / baseline)':40}{r['ratio']:>10.2f}x")
    lines.append("")
    if r["device"].startswith("cuda"):
        ok = r["ours"]["tokens_per_s"] >= TARGET_H100_TOKENS
        lines.append(f"target (H100): ours >= {TARGET_H100_TOKENS:,} tokens/s: {r['ours']['tokens_per_s']:,.0f}  "
                     f"{'PASS' if ok else 'FAIL'}" + ("" if "H100" in r["device_name"] else
                                                     f"  (this GPU is {r['device_name']}, not an H100)"))
        if r["batch_tokens"] < 16_000:
            lines.append("note: with small batches a GPU step is bound by kernel launches and Python; the batch size "
                         "is part of the recipe: try --batch-tokens 32768 or 65536 as well")
    else:
        ok = r["ratio"] >= TARGET_CPU_RATIO
        lines.append(f"target (CPU): ours >= {TARGET_CPU_RATIO}x baseline: {r['ratio']:.2f}x  "
                     f"{'PASS' if ok else 'FAIL'}")
        lines.append(f"target (H100, not measured here): ours >= {TARGET_H100_TOKENS:,} tokens/s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench: --device cuda, but torch sees no CUDA GPU")
    device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    try:
        if args.config:
            base = TrainConfig.from_toml(args.config)
            model_cfg = base.model
        else:
            base = TrainConfig.from_toml(DEFAULT_CONFIG) if DEFAULT_CONFIG.is_file() else TrainConfig()
            model_cfg = ModelConfig(**{**base.model.to_dict(), **REFERENCE_DIMS})
    except ValueError as err:
        raise SystemExit(f"bench: {err}") from None
    try:
        data, vocab, data_desc = load_data(args, model_cfg.vocab_size, base.max_len)
    except (ValueError, OSError) as err:  # DataError, TokenizerError are ValueErrors
        raise SystemExit(f"bench: {err}") from None
    model_cfg = ModelConfig(**{**model_cfg.to_dict(), "vocab_size": vocab})
    train_cfg = TrainConfig.from_dict({**base.to_dict(), "model": model_cfg.to_dict(), "seed": args.seed,
                                       "batch_tokens": args.batch_tokens, "device": device.type})

    needed = args.warmup + args.steps
    order = make_batches(data, args.batch_tokens, args.seed, 0)
    batches = [collate(data, order[i % len(order)]) for i in range(needed)]
    timed = batches[args.warmup:]
    positions = sum(int(b.tgt_out.numel()) for b in timed)
    target_tokens = sum(b.target_tokens for b in timed)

    bf16_ours = not args.no_bf16 and bf16_autocast_used(device, train_cfg)
    bf16_base = args.baseline_bf16 and native_bf16(device)  # whatever the config says of ours
    if args.baseline_bf16 and not bf16_base:
        print(f"bench_train: --baseline-bf16 ignored: {device} has no native bf16, both run fp32", file=sys.stderr)
    ours_step, ours_model = make_ours(model_cfg, train_cfg, device, bf16_ours, args.compile)
    base_step, base_model = make_baseline(model_cfg, train_cfg, device, bf16_base)
    print(f"bench_train: {needed} batches, each stepped by both systems ...", file=sys.stderr)
    monitor = CpuMonitor()
    figures = run_interleaved({"ours": ours_step, "baseline": base_step}, batches, args.warmup, device,
                              progress=sys.stderr.isatty())
    other = monitor.other_cores()
    result: dict[str, Any] = {
        "benchmark": "bench_train", "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
        "threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
        "machine": machine(), "config": model_cfg.to_dict(), "data": data_desc,
        "steps": args.steps, "warmup": args.warmup, "batch_tokens": args.batch_tokens, "seed": args.seed,
        "timed_target_tokens": target_tokens, "padding_share": round(1 - target_tokens / positions, 4),
        "precision_ours": "bf16 autocast" if bf16_ours else "fp32",
        "precision_baseline": "bf16 autocast" if bf16_base else "fp32", "compile": args.compile,
        "params_ours": ours_model.num_parameters(),
        "params_baseline": sum(p.numel() for p in base_model.parameters()),
        "ours": figures["ours"], "baseline": figures["baseline"],
        "ratio": round(figures["ours"]["tokens_per_s"] / figures["baseline"]["tokens_per_s"], 3),
        "other_cores": other, "busy": other is not None and other > 0.2 and device.type == "cpu",
        "quick": args.quick,
        "targets": {"cpu_ratio_min": TARGET_CPU_RATIO, "h100_tokens_per_s_min": TARGET_H100_TOKENS},
    }
    if not (figures["ours"]["finite"] and figures["baseline"]["finite"]):
        print("WARNING: a loss is not finite", file=sys.stderr)
    emit(table(result), result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
