#!/usr/bin/env python
"""An 8B model opened memory-mapped, and what the memory estimate says of it (issue 53).

Llama-3.1-8B's published config (`viz_model.hf.sparse_folder.LLAMA_3_1_8B`, written by transformers' LlamaConfig, no
hub) with its weights as sparse safetensors shards: every tensor a hole that reads as zeros (the norms ones), so the
32 GB of fp32 shards (16 GB in bf16) take about a megabyte of disk. Recorded:

* **open**: ``viz_model.load(folder, device="cpu")`` of the fp32 shards in a fresh process (the import into a cache
  reads the headers only, then the weights are mapped, not read): seconds, and the resident set after opening (anonymous
  and file-backed);
* **estimates** (`viz_model.analysis.memory_estimate`): a 512-token trace of the bf16 model on a GPU, of the mapped
  fp32 model on the CPU, of the bf16 model on the CPU (upcast to an fp32 copy), and a 4,096-token trace of
  Llama-3.2-1B in bf16 on a GPU; each checked against the memory available here (`check_fits`: fits, or its one-line
  refusal);
* **on a GPU** (where torch sees one): bf16 traces of a 512-token prompt of the 8B model and a 4,096-token prompt of
  the 1B model, each in a fresh process: load seconds, trace milliseconds (warmed once, then `--runs` calls), the
  peak GPU memory against the estimate. Never run on the CPU (an 8B forward would take minutes and 32 GB).

Results: ``benchmarks/results/bench_big_model.json``, or ``bench_big_model_cuda.json`` where the GPU traces ran
(``--out`` elsewhere; none with ``--quick``).

    python benchmarks/bench_big_model.py [--runs 3] [--device auto|cpu|cuda]
    python benchmarks/bench_big_model.py --quick --json      # smoke test: a small config, the same steps
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from bench_common import REPO, emit, load_average, resident_kb, write_results

from viz_model.analysis.memory_estimate import (
    MemoryFitError,
    available_bytes,
    check_fits,
    directory_estimate,
)
from viz_model.hf.importer import import_model
from viz_model.hf.sparse_folder import LLAMA_3_1_8B, LLAMA_3_2_1B, sparse_llama_folder
from viz_model.modeldir.sparse_weights import disk_bytes

QUICK = {"vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": False}
GB = 1024**3
MAPS = {512: "full", 4096: "on_demand"}  # each trace's maps, estimated and traced alike: the 8B's every map kept


def status_bytes(field: str) -> int:
    """`field` of this process's ``/proc/self/status``, in bytes."""
    return resident_kb(field) * 1024


def child_open(folder: str) -> dict:
    """Open `folder` on the CPU in this fresh process: seconds and the resident set it added."""
    import viz_model

    before = {field: status_bytes(field) for field in ("VmRSS", "RssAnon", "RssFile")}
    start = time.perf_counter()
    lm = viz_model.load(folder, device="cpu")
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    viz_model.load(folder, device="cpu")  # the second open: the import is cached
    again = time.perf_counter() - start
    added = {field: round((status_bytes(field) - before[field]) / 2**20, 1) for field in before}
    return {"open_s": round(seconds, 2), "open_again_s": round(again, 2), "rss_added_mb": added["VmRSS"],
            "anon_added_mb": added["RssAnon"], "file_added_mb": added["RssFile"],
            "parameters": sum(p.numel() for p in lm.network.parameters()),
            "weights_dtype": str(next(lm.network.parameters()).dtype).removeprefix("torch.")}


def child_trace(folder: str, n: int, runs: int) -> dict:
    """Load `folder` on the GPU and trace an `n`-token prompt in bf16: seconds, milliseconds, peak memory."""
    import viz_model

    start = time.perf_counter()
    lm = viz_model.load(folder, device="cuda")
    torch.cuda.synchronize()
    loaded = time.perf_counter() - start
    text = " the" * n
    n_tokens = len(lm.encode(text))
    lm.trace(text, max_new_tokens=0, maps=MAPS[n])  # warm
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        trace = lm.trace(text, max_new_tokens=0, maps=MAPS[n])
        torch.cuda.synchronize()
        times.append(1000 * (time.perf_counter() - start))
    return {"tokens": n_tokens, "load_s": round(loaded, 1), "trace_p50_ms": round(statistics.median(times), 1),
            "times_ms": [round(t, 1) for t in times], "peak_gpu_gb": round(torch.cuda.max_memory_allocated() / GB, 2),
            "maps": "full" if isinstance(trace.decoder_attentions, list) else "on demand",
            "last_timings_ms": {k: round(v, 1) for k, v in (trace.timings or {}).items()},
            "weights_dtype": str(next(lm.network.parameters()).dtype).removeprefix("torch.")}


def child(*arguments: str, cache: Path) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *arguments]
    result = subprocess.run(command, capture_output=True, text=True, check=False,
                            env={**os.environ, "VIZ_MODEL_CACHE": str(cache)})
    if result.returncode != 0:
        raise SystemExit(f"the child ({' '.join(arguments[:1])}) failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def estimated(directory: Path, n: int, device: str) -> dict:
    """The estimate's parts in GB (the maps as `MAPS` names them for `n` tokens), its line, and whether it fits the
    memory available here."""
    found = directory_estimate(directory, n, MAPS[n], device=device)
    record = {part: round(getattr(found, part) / GB, 3) for part in
              ("total", "weights", "cache", "maps", "activations", "logits", "trace")}
    record |= {"weights_held": found.weights_held, "compute_dtype": found.compute_dtype, "maps_mode": found.maps_mode,
               "summary": found.summary()}
    if device == "cpu" or torch.cuda.is_available():
        try:
            check_fits(found, available_bytes(device))
            record["fits_here"] = True
        except MemoryFitError as err:
            record["fits_here"], record["refusal"] = False, str(err)
    return record


def folder_bytes(folder: Path) -> dict:
    shards = sorted(folder.glob("*.safetensors"))
    return {"shards": len(shards), "apparent_gb": round(sum(f.stat().st_size for f in shards) / GB, 2),
            "disk_mb": round(sum(disk_bytes(f) for f in shards) / 2**20, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed traces on a GPU (default 3)")
    parser.add_argument("--quick", action="store_true", help="smoke test: a small config in place of 8B and 1B")
    parser.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    parser.add_argument("--out", type=Path, default=None, help="results file (default: benchmarks/results/"
                        "bench_big_model.json, bench_big_model_cuda.json with the GPU traces; none with --quick)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the bf16 traces run: auto (the GPU where torch sees one), cuda (refused without "
                        "one), cpu (estimates only: never traced on the CPU)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, folder, *rest = args.child
        print(json.dumps(child_open(folder) if kind == "open" else child_trace(folder, int(rest[0]), args.runs)))
        return 0
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU here (torch " + torch.__version__ + ")")
    on_gpu = args.device != "cpu" and torch.cuda.is_available()
    big, small = (QUICK, QUICK) if args.quick else (LLAMA_3_1_8B, LLAMA_3_2_1B)
    found: dict[str, Any] = {"model": "Llama-3.1-8B config" + (" (quick: small)" if args.quick else ""),
                             "weights": "sparse safetensors shards (holes: zeros, norms ones)", "quick": args.quick,
                             "load_average_before": load_average(), "memory_available_gb":
                             round(available_bytes("cpu") / GB, 1)}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp), Path(tmp) / "cache"
        fp32 = sparse_llama_folder(root / "hf-fp32", big, torch.float32)
        bf16 = sparse_llama_folder(root / "hf-bf16", big, torch.bfloat16)
        found["folders"] = {"fp32": folder_bytes(fp32), "bf16": folder_bytes(bf16)}
        found["open_cpu_fp32"] = child("open", str(fp32), cache=cache)
        print("open", json.dumps(found["open_cpu_fp32"]), file=sys.stderr, flush=True)
        one = sparse_llama_folder(root / "hf-1b-bf16", small, torch.bfloat16)
        dirs = {name: import_model(str(folder), root / name) for name, folder in
                (("8b-fp32", fp32), ("8b-bf16", bf16), ("1b-bf16", one))}
        found["estimates"] = {"8b_bf16_gpu_512": estimated(dirs["8b-bf16"], 512, "cuda"),
                              "8b_fp32_mapped_cpu_512": estimated(dirs["8b-fp32"], 512, "cpu"),
                              "8b_bf16_cpu_512": estimated(dirs["8b-bf16"], 512, "cpu"),
                              "1b_bf16_gpu_4096": estimated(dirs["1b-bf16"], 4096, "cuda")}
        if on_gpu:
            found["gpu"] = {"8b_bf16_512": child("trace", str(bf16), "512", cache=cache),
                            "1b_bf16_4096": child("trace", str(one), "4096", cache=cache)}
        else:
            found["gpu"] = ("not run: --device cpu" if args.device == "cpu" else
                            "not run: torch sees no CUDA GPU here")
    found["load_average_after"] = load_average()
    found["wall_s"] = round(time.perf_counter() - start, 1)
    if args.out is not None or not args.quick:
        name = "bench_big_model_cuda.json" if on_gpu else "bench_big_model.json"
        write_results(args.out or REPO / "benchmarks" / "results" / name, found)
    lines = [f"open (CPU, fp32 mapped): {found['open_cpu_fp32']['open_s']} s, resident set +"
             f"{found['open_cpu_fp32']['rss_added_mb']} MB ({found['folders']['fp32']['apparent_gb']} GB of shards, "
             f"{found['folders']['fp32']['disk_mb']} MB on disk)"]
    lines += [f"{name}: {record['summary']}" + ("" if record.get("fits_here", True) else " (refused here)")
              for name, record in found["estimates"].items()]
    if isinstance(found["gpu"], dict):
        lines += [f"GPU {name}: trace {r['trace_p50_ms']} ms, peak {r['peak_gpu_gb']} GB" for name, r in
                  found["gpu"].items()]
    emit("\n".join(lines), found, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
