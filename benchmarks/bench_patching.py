#!/usr/bin/env python
"""Head patching's speed (issue 61): every head of a GPT-2-small-sized model (12 layers x 12 heads, d_model 768, the
published config with random weights, seed 0, as `bench_lm.py` builds it) patched from a clean prompt's run into a
corrupted one's, a pair of 20 tokens: `viz_model.analysis.head_patching.restored_by_head` (the corrupted prompt once
per head, one batch row per head), the median of --runs runs after one warm-up, and once the same heads one
`patched_logits` call each (the loop the batches replace), checked equal. Target: under 10 s on a laptop CPU.
``sweep_cpu_p50_s`` is the CPU time the sweep's process used (all its threads): on a busy machine the wall time
counts the other processes' turns too.
Results: ``benchmarks/results/patching.json`` (``--out`` elsewhere).

    python benchmarks/bench_patching.py [--runs 5] [--threads N]
    python benchmarks/bench_patching.py --quick --json     # smoke test: a tiny GPT-2, one run
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_common import CpuMonitor, add_output_args, emit, finish_results, load_average
from bench_lm import build_folder

import viz_model
from viz_model.analysis.head_patching import answer_tokens, restored_by_head
from viz_model.hf.importer import import_model

CLEAN = "The old lighthouse keeper climbed the narrow stairs every evening and said that the capital of France is"
CORRUPTED = "The old lighthouse keeper climbed the narrow stairs every evening and said that the capital of Italy is"
TARGET_S = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of the batched sweep (median reported)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    add_output_args(parser, "patching.json", "a tiny GPT-2 (2 layers, 4 heads, d_model 32), one run")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    runs = 1 if args.quick else args.runs
    monitor, start, load_before = CpuMonitor(), time.perf_counter(), load_average()
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_folder(Path(tmp), "gpt2", "GPT2LMHeadModel", args.quick, torch.float32)
        model = viz_model.load(import_model(str(folder), Path(tmp) / "ours"), device="cpu")
    tokens = len(model.encode(CLEAN))
    answer, wrong = answer_tokens(model, CLEAN, CORRUPTED)
    restored_by_head(model, CLEAN, CORRUPTED, answer, wrong)  # warm-up
    times, cpu, found = [], [], None
    for _ in range(runs):
        begin, begin_cpu = time.perf_counter(), time.process_time()
        found = restored_by_head(model, CLEAN, CORRUPTED, answer, wrong)
        times.append(time.perf_counter() - begin)
        cpu.append(time.process_time() - begin_cpu)
    layers, heads = found.restored.shape
    begin = time.perf_counter()
    looped = [model.patched_logits(CORRUPTED, CLEAN, [(layer, head)]) for layer in range(layers)
              for head in range(heads)]
    loop_s = time.perf_counter() - begin
    span = found.clean_difference - found.corrupted_difference
    batched = found.corrupted_difference + found.restored.reshape(-1) * span
    one_by_one = [float(row[answer].double() - row[wrong].double()) for row in looped]
    worst = max(abs(a - b) for a, b in zip(batched, one_by_one))
    if worst > 1e-4:
        raise SystemExit(f"bench: the batched sweep and the loop differ by {worst:.2e} in a logit difference")
    config = model.config
    result = {
        "model": {"layers": config.decoder_layers, "heads": config.heads, "d_model": config.d_model,
                  "vocab_size": config.vocab_size, "weights": "random (seed 0), fp32, CPU"},
        "prompt_tokens": tokens, "heads_patched": layers * heads, "threads": torch.get_num_threads(),
        "runs": runs, "sweep_p50_s": round(statistics.median(times), 3), "sweep_s": [round(t, 3) for t in times],
        "sweep_cpu_p50_s": round(statistics.median(cpu), 3),
        "loop_s": round(loop_s, 3), "loop_over_sweep": round(loop_s / statistics.median(times), 2),
        "max_logit_difference_gap": worst, "target_s": TARGET_S,
        "under_target": statistics.median(times) < TARGET_S, "load_average_before": load_before,
    }
    text = (f"every head ({layers}x{heads}) of a {config.d_model}-wide model patched, {tokens}-token prompts, "
            f"{result['threads']} threads: {result['sweep_p50_s']} s batched (median of {runs}), {result['loop_s']} s "
            f"one call a head")
    finish_results(args, result, "patching.json", monitor, start)
    emit(text, result, args.json)


if __name__ == "__main__":
    main()
