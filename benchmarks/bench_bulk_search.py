#!/usr/bin/env python
"""Bulk evaluation with the full-precision search (batched by length) against the int8 one (a sentence at a time).

Runs ``viz-model eval`` on the Multi30K validation set with the shipped model, beam 4, twice in alternation per
round: ``--precision fp32`` and ``--precision int8``, each a fresh process with 2 threads (start and load included).
Writes the wall times, their ratio, both BLEU lines and the other cores' load to
``benchmarks/results/bench_bulk_search.json``.

    python benchmarks/bench_bulk_search.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import CpuMonitor, load_average, write_results

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
DATA = data_root() / "multi30k"
OUT = REPO / "benchmarks" / "results" / "bench_bulk_search.json"


def run_eval(search: str) -> tuple[float, dict]:
    """Wall seconds of one `viz-model eval` process and its JSON line."""
    command = [sys.executable, "-m", "viz_model", "eval", "--src", str(DATA / "val.en.gz"), "--ref",
               str(DATA / "val.de.gz"), "--beam", "4", "--precision", search]
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    monitor, load_before = CpuMonitor(children=True), load_average()
    seconds: dict[str, list[float]] = {"fp32": [], "int8": []}
    scores: dict[str, dict] = {}
    for _ in range(args.rounds):
        for search in seconds:
            wall, scores[search] = run_eval(search)
            seconds[search].append(round(wall, 1))
            print(f"{search}: {wall:.1f} s {scores[search]}", file=sys.stderr)
    median = {k: round(statistics.median(v), 1) for k, v in seconds.items()}
    result = {"model": "the shipped default", "data": "multi30k val", "beam": 4, "threads": 2, "rounds": args.rounds,
              "seconds": seconds, "median_s": median, "int8_vs_fp32": round(median["int8"] / median["fp32"], 2),
              "scores": scores, "other_cores": monitor.other_cores(), "load_before": load_before}
    print(json.dumps(result, indent=2))
    write_results(OUT, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
