#!/usr/bin/env python
"""Head patching's speed (issue 61): every head of a GPT-2-small-sized model (12 layers x 12 heads, d_model 768, the
published config with random weights, seed 0, as `bench_lm.py` builds it) patched from a clean prompt's run into a
corrupted one's: `viz_model.analysis.head_patching.restored_by_head` (the corrupted prompt once per head, one batch
row per head), the median of --runs runs after one warm-up, and once the same heads one `patched_logits` call each
(the loop the batches replace), checked equal. Two pairs of 20 tokens: one that differs in its last words (the
positions before are shared: run once) and one that differs in its first word (nothing shared: the most work).
``cpu_p50_s`` is the CPU time the process used (all its threads): on a busy machine the wall time also counts other
processes' turns. Target: under 10 s on a laptop CPU. Results: ``benchmarks/results/patching.json`` (``--out``
elsewhere).

    python benchmarks/bench_patching.py [--runs 3] [--threads N]
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
from viz_model.kinds.language_model import shared_prefix

CLAUSE = "the old lighthouse keeper climbed the narrow stairs every evening and said that the capital"
PAIRS = {"last_word": (f"The {CLAUSE[4:]} of France is", f"The {CLAUSE[4:]} of Italy is"),
         "first_word": (f"France: {CLAUSE} is", f"Italy: {CLAUSE} is")}
TARGET_S = 10.0


def measure(model: viz_model.LanguageModel, clean: str, corrupted: str, runs: int) -> dict:
    """The batched sweep's wall and CPU time (median of `runs` after a warm-up) and the loop's, checked equal."""
    answer, wrong = answer_tokens(model, clean, corrupted)
    restored_by_head(model, clean, corrupted, answer, wrong)  # warm-up
    times, cpu, found = [], [], None
    for _ in range(runs):
        begin, begin_cpu = time.perf_counter(), time.process_time()
        found = restored_by_head(model, clean, corrupted, answer, wrong)
        times.append(time.perf_counter() - begin)
        cpu.append(time.process_time() - begin_cpu)
    layers, heads = found.restored.shape
    begin = time.perf_counter()
    looped = [model.patched_logits(corrupted, clean, [(layer, head)]) for layer in range(layers)
              for head in range(heads)]
    loop_s = time.perf_counter() - begin
    span = found.clean_difference - found.corrupted_difference
    batched = found.corrupted_difference + found.restored.reshape(-1) * span
    worst = max(abs(a - float(row[answer].double() - row[wrong].double())) for a, row in zip(batched, looped))
    if worst > 1e-4:
        raise SystemExit(f"bench: the batched sweep and the loop differ by {worst:.2e} in a logit difference")
    ids = model.encode(corrupted)
    return {"prompt_tokens": len(ids), "shared_tokens": shared_prefix(ids, model.encode(clean)),
            "heads_patched": layers * heads, "sweep_p50_s": round(statistics.median(times), 3),
            "sweep_s": [round(t, 3) for t in times], "cpu_p50_s": round(statistics.median(cpu), 3),
            "loop_s": round(loop_s, 3), "loop_over_sweep": round(loop_s / statistics.median(times), 2),
            "max_logit_difference_gap": worst, "under_target": statistics.median(times) < TARGET_S}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of the batched sweep (median reported)")
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
    pairs = {name: measure(model, clean, corrupted, runs) for name, (clean, corrupted) in PAIRS.items()}
    config = model.config
    result = {"model": {"layers": config.decoder_layers, "heads": config.heads, "d_model": config.d_model,
                        "vocab_size": config.vocab_size, "weights": "random (seed 0), fp32, CPU"},
              "threads": torch.get_num_threads(), "runs": runs, "target_s": TARGET_S, "pairs": pairs,
              "load_average_before": load_before}
    text = "\n".join(f"{name}: every head ({found['heads_patched']}) of a {config.d_model}-wide model, "
                     f"{found['prompt_tokens']} tokens ({found['shared_tokens']} shared), {result['threads']} threads: "
                     f"{found['sweep_p50_s']} s batched (median of {runs}; {found['cpu_p50_s']} s of CPU), "
                     f"{found['loop_s']} s one call a head" for name, found in pairs.items())
    finish_results(args, result, "patching.json", monitor, start)
    emit(text, result, args.json)


if __name__ == "__main__":
    main()
