#!/usr/bin/env python
"""Where `FULL_MAPS_MAX_TOKENS` stands: one explorer visit with every map kept against one with maps on demand.

The GPT-2-small and Qwen2.5-0.5B sizes (as `bench_lm.py` builds them: published configs, random weights, seed 0,
imported), fp32 on the CPU, 2 threads, prompts of 64, 128, 256, 512 and 1,024 tokens. A visit is what the explorer
reads for one prompt: ``LanguageModel.trace(prompt, max_new_tokens=0, maps=...)``, then every layer's block-mean grid
for the model view (`block_mean_grid`, `SUMMARY_CELLS` blocks a side as `summary_model_view` reads it) and one
head's map (``trace.head_map``). Each side at each length runs in `--repeats` fresh processes, the sides alternating
(which goes first alternates too); each process warms one visit, then times `--runs` visits; the peak memory is what
the first timed visit adds to the resident set (`bench_lm.peak_added_mb`). A side's figure is the median over all its
timed visits.

The rule (written before the run): ``FULL_MAPS_MAX_TOKENS`` is the largest measured length at which, on both models,
the median visit with every map kept takes less than 90% of the median visit with maps on demand (full faster by
more than 10%), every shorter measured length passing too; 0 (every trace on demand) where the shortest fails.
`threshold` applies it to a results file; ``tests/library/test_maps_threshold.py`` checks that the constant equals it
where the run was quiet (other processes keeping at most `QUIET` cores busy, ``other_cores_busy``): timings taken
beside other work on 2 cores are not a measure of either side.

    python benchmarks/bench_maps_threshold.py [--runs 3] [--repeats 2]   # benchmarks/results/bench_maps_threshold.json
    python benchmarks/bench_maps_threshold.py --quick --json             # smoke test: tiny models, short prompts
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LENGTHS = (64, 128, 256, 512, 1024)
QUICK_LENGTHS = (16, 32)
SIDES = ("full", "on_demand")
FASTER_BY = 0.10  # full must take less than (1 - FASTER_BY) of on demand's time
QUIET = 0.25  # a run decides only where other processes kept at most this many cores busy (`other_cores_busy`)
RULE = ("the largest measured length at which, on both models, the median visit with every map kept takes less "
        f"than {1 - FASTER_BY:.0%} of the median visit with maps on demand, every shorter length passing too; "
        "0 where the shortest fails")


def threshold(results: dict) -> int:
    """`RULE` applied to a results file's ``models``: the length up to which full maps are kept."""
    found = 0
    lengths = sorted({int(n) for model in results["models"].values() for n in model["lengths"]})
    for n in lengths:
        sides = [model["lengths"][str(n)] for model in results["models"].values()]
        if not all(s["full"]["visit_p50_ms"] < (1 - FASTER_BY) * s["on_demand"]["visit_p50_ms"] for s in sides):
            break
        found = n
    return found


def run_child(args: argparse.Namespace) -> int:
    """One side at one length, in this fresh process: its visits' figures as one JSON line."""
    import torch
    import transformers
    from bench_long_prompt import measured, prompt_of, timed_calls

    import viz_model
    from viz_model.analysis.map_summary import block_mean_grid
    from viz_model.plot.long_map_figures import SUMMARY_CELLS, SUMMARY_ROWS

    torch.set_num_threads(args.threads)
    side, folder, out, n = args.child[0], Path(args.child[1]), Path(args.child[2]), int(args.child[3])
    ours = viz_model.load(out, device="cpu")
    text = prompt_of(transformers.AutoTokenizer.from_pretrained(folder), n)
    if len(ours.encode(text)) != n:
        raise SystemExit(f"the prompt is {len(ours.encode(text))} tokens, not {n}")
    parts: dict[str, list[float]] = {"trace": [], "model_view": [], "head": []}

    def visit() -> viz_model.AttentionTrace:
        marks = [time.perf_counter()]
        trace = ours.trace(text, max_new_tokens=0, maps=side)
        marks.append(time.perf_counter())
        block_mean_grid(trace, "decoder", SUMMARY_CELLS, max(1, n // (SUMMARY_CELLS * SUMMARY_ROWS)))
        marks.append(time.perf_counter())
        trace.head_map("decoder", len(trace.decoder_attentions) // 2, 0)
        marks.append(time.perf_counter())
        for name, start, end in zip(parts, marks, marks[1:]):
            parts[name].append(1000 * (end - start))
        return trace
    kept = visit()  # warm
    found = {"tokens": n, "trace_mb": round(kept.nbytes / 2 ** 20, 1)}
    del kept
    for times in parts.values():
        times.clear()
    found["visit"] = measured(*timed_calls(visit, args.runs))
    found["parts_p50_ms"] = {name: round(statistics.median(times), 1) for name, times in parts.items()}
    print(json.dumps(found))
    return 0


def child(side: str, folder: Path, out: Path, n: int, args: argparse.Namespace) -> dict:
    from bench_common import load_average

    command = [sys.executable, str(Path(__file__).resolve()), "--child", side, str(folder), str(out), str(n),
               "--runs", str(args.runs), "--threads", str(args.threads)]
    load = load_average()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the child ({side}, {n} tokens) failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1]) | {"load_average_before": load}


def model_case(label: str, root: Path, args: argparse.Namespace) -> dict:
    """Both sides at every length on one model size, `args.repeats` fresh processes each, the sides alternating."""
    import torch
    from bench_lm import MODELS, build_folder

    from viz_model.hf.importer import import_model

    name, model_class, _ = MODELS[label]
    folder = build_folder(root, name, model_class, args.quick, torch.float32)
    out = root / f"{name}-imported"
    import_model(str(folder), out)
    lengths: dict[str, Any] = {}
    for n in args.lengths:
        runs: dict[str, list[dict]] = {side: [] for side in SIDES}
        for repeat in range(args.repeats):
            for side in SIDES if repeat % 2 == 0 else SIDES[::-1]:
                runs[side].append(child(side, folder, out, n, args))
                print(label, n, side, json.dumps(runs[side][-1]), file=sys.stderr, flush=True)
        entry: dict[str, Any] = {}
        for side, found in runs.items():
            visits = [t for r in found for t in r["visit"]["times_ms"]]
            peaks = [r["visit"]["peak_added_mb"] for r in found if r["visit"]["peak_added_mb"] is not None]
            entry[side] = {"visit_p50_ms": round(statistics.median(visits), 1),
                           "peak_added_mb": round(statistics.median(peaks), 1) if peaks else None,
                           "trace_mb": found[0]["trace_mb"], "processes": found}
        entry["full_over_on_demand"] = round(entry["full"]["visit_p50_ms"] / entry["on_demand"]["visit_p50_ms"], 3)
        lengths[str(n)] = entry
    return {"lengths": lengths}


def table(found: dict) -> str:
    lines = [f"{'model':14} {'tokens':>7} {'full ms':>9} {'lazy ms':>9} {'full/lazy':>9} {'full MB':>9} "
             f"{'lazy MB':>9}"]
    for label, model in found["models"].items():
        for n, e in model["lengths"].items():
            full, lazy = e["full"], e["on_demand"]
            lines.append(f"{label:14} {n:>7} {full['visit_p50_ms']:9.1f} {lazy['visit_p50_ms']:9.1f} "
                         f"{e['full_over_on_demand']:9.3f} {full['peak_added_mb']!s:>9} {lazy['peak_added_mb']!s:>9}")
    lines.append(f"threshold by the rule: {found['threshold']} tokens")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from bench_common import CpuMonitor, add_output_args, emit, finish_results, load_average

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed visits in each process (default 3)")
    parser.add_argument("--repeats", type=int, default=2, help="fresh processes per side and length (default 2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--models", nargs="+", default=["gpt2-small", "qwen2.5-0.5b"],
                        choices=["gpt2-small", "qwen2.5-0.5b"])
    add_output_args(parser, "bench_maps_threshold.json", "tiny models, 1 run, short prompts")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)
    if args.quick:
        args.runs, args.repeats, args.lengths = 1, 2, list(QUICK_LENGTHS)
    if any(n < 2 for n in args.lengths) or args.runs < 1 or args.repeats < 1:
        parser.error("--lengths must be at least 2 tokens, --runs and --repeats at least 1")
    from viz_model.on_demand import FULL_MAPS_MAX_TOKENS

    monitor = CpuMonitor(children=True)
    found: dict[str, Any] = {"dtype": "fp32", "device": "cpu", "runs": args.runs, "repeats": args.repeats,
                             "threads": args.threads, "quick": args.quick, "rule": RULE,
                             "full_maps_max_tokens_at_run": FULL_MAPS_MAX_TOKENS,
                             "load_average_before": load_average(), "models": {}}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for label in args.models:
            root = Path(tmp) / label
            root.mkdir()
            found["models"][label] = model_case(label, root, args)
    found["threshold"] = threshold(found)
    finish_results(args, found, "bench_maps_threshold.json", monitor, start)
    emit(table(found), found, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
