#!/usr/bin/env python
"""The corpus commands under torchrun against one process, on the Multi30K validation set (issue 37).

Each command runs twice on the same input with the shipped model: once as one process with one thread, once under
``torchrun --standalone --nproc_per_node N`` (one thread per process, torchrun's default). Reported per command:
whether the two outputs are the same bytes (SHA-256 of the table, or of ``eval``'s JSON line), and both wall times
(process start and model load included). Writes ``benchmarks/results/bench_torchrun.json``.

    python benchmarks/bench_torchrun.py                  # 2 processes, ~6 min on 2 cores
    python benchmarks/bench_torchrun.py --quick          # 40 sentences, no results file
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import write_results

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
DATA = data_root() / "multi30k"
OUT = REPO / "benchmarks" / "results" / "bench_torchrun.json"


def commands(src: Path, ref: Path, attribute_limit: int) -> dict[str, list[str]]:
    """Each command on the whole (already cut) input; attribute on its first `attribute_limit` sentences."""
    return {
        "eval": ["eval", "--src", str(src), "--ref", str(ref), "--precision", "fp32"],
        "analyze": ["analyze", "--src", str(src)],
        "importance": ["importance", "--src", str(src), "--tgt", str(ref)],
        "attribute": ["attribute", "--src", str(src), "--limit", str(attribute_limit), "--workers", "1"],
    }


def timed(command: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started, done


def digest(path: Path | None, stdout: str) -> str:
    return hashlib.sha256(path.read_bytes() if path else stdout.encode()).hexdigest()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--limit", type=int, default=1014, help="sentences for eval, analyze, importance (default all)")
    p.add_argument("--attribute-limit", type=int, default=200, help="sentences for attribute (default 200)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.limit = args.attribute_limit = 40
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        src, ref = work / "val.en", work / "val.de"
        for name, path in (("val.en.gz", src), ("val.de.gz", ref)):
            with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
                path.write_text("".join(f.readlines()[:args.limit]), encoding="utf-8")
        for name, base in commands(src, ref, args.attribute_limit).items():
            outputs = {}
            for mode in ("one", "torchrun"):
                out = work / f"{name}-{mode}.csv" if name != "eval" else None
                tail = ["--device", "cpu", *(["--out", str(out)] if out else [])]
                launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                             str(args.processes), "-m", "viz_model"] if mode == "torchrun"
                            else [sys.executable, "-m", "viz_model"])
                seconds, done = timed([*launcher, *base, *tail], env)
                outputs[mode] = {"seconds": round(seconds, 1), "sha256": digest(out, done.stdout)}
                print(f"{name} ({mode}): {seconds:.1f} s", file=sys.stderr, flush=True)
            rows[name] = {**outputs, "identical": outputs["one"]["sha256"] == outputs["torchrun"]["sha256"],
                          "speedup": round(outputs["one"]["seconds"] / outputs["torchrun"]["seconds"], 2)}
    result = {"processes": args.processes, "threads_per_process": 1, "sentences": args.limit,
              "attribute_sentences": args.attribute_limit, "data": "multi30k val", "commands": rows,
              "cores": os.cpu_count()}
    print(json.dumps(result, indent=2))
    if not args.quick:
        write_results(OUT, result)
    return 0 if all(r["identical"] for r in rows.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
