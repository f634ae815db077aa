#!/usr/bin/env python
"""A long prompt's trace with maps made on demand against transformers' forward with ``output_attentions`` (issue 53).

A Qwen2.5-0.5B-size model (its published config and tokenizer in ``tests/fixtures/lm``, random weights, seed 0, built
by transformers and imported with `viz_model.hf.importer.import_model`) over prompts of 512, 2,048 and 4,096 tokens,
fp32 on the CPU. Each measurement runs in a fresh process that loads both models and warms its call once, then times
`--runs` calls; the peak memory is what the first timed call adds to the resident set (`bench_lm.peak_added_mb`):

* **ours (on demand)**: ``LanguageModel.trace(prompt, max_new_tokens=0, maps="on_demand")``, the trace's bytes, then
  reading one head's map (``trace.head_map``) and one full layer (``trace.decoder_attentions[layer]``);
* **ours (full maps)**: ``trace(..., maps="full")``, every map kept (`bench_maps_threshold.py` sets
  `FULL_MAPS_MAX_TOKENS` from both kinds of visit at 64 to 1,024 tokens);
* **transformers**: the forward pass with ``output_attentions=True`` (eager attention).

A side whose maps alone (layers x heads x n² x 4 B) would take more than ``--memory-limit-gb`` (default: half the
memory available when the run starts) is not run: the results file records the estimate and "not run: would need X
GB". Results: ``benchmarks/results/bench_long_prompt.json`` (``--out`` elsewhere; none with ``--quick``).

``--forward`` (issue 62: the trace near the forward pass) measures instead, side by side in one fresh process, the
12-layer Llama of the issue (d 768, 12 heads on 4 key/value heads, d_ff 2,048; random weights, seed 0, the tests'
byte-level BPE: `FORWARD_LLAMA`, built by transformers and imported) over a ``--tokens`` prompt (default 4,096):

* **ours**: ``trace(prompt, max_new_tokens=0, maps="on_demand")`` plus one head's map (``trace.head_map``);
* **transformers (sdpa)**: ``LlamaForCausalLM`` with sdpa attention, its forward over the same ids, no maps.

Both are warmed once, then timed ``--runs`` times each, alternating which goes first; each side's first timed call
also gives its peak memory (`bench_lm.peak_added_mb`). The ratio of the medians is the issue's figure (goal: at most
`FORWARD_GOAL`); the trace's top probabilities are checked against transformers' logits (a benchmark of different
outputs is void). Results: ``benchmarks/results/bench_long_prompt_forward.json``.

    python benchmarks/bench_long_prompt.py [--runs 3] [--threads 2] [--lengths 512 2048 4096]
    python benchmarks/bench_long_prompt.py --quick --json      # smoke test: a tiny model of the same family
    python benchmarks/bench_long_prompt.py --forward [--runs 5] [--tokens 4096]    # about 2 minutes a run on 2 cores
    python benchmarks/bench_long_prompt.py --forward --quick   # smoke test: a tiny Llama, 256 tokens
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from bench_common import REPO, CpuMonitor, add_output_args, emit, finish_results, load_average
from bench_lm import QUICK, QWEN, build_folder, peak_added_mb

import viz_model
from viz_model.analysis.memory_estimate import available_bytes
from viz_model.hf.importer import import_model
from viz_model.on_demand import FULL_MAPS_MAX_TOKENS

LENGTHS = (512, 2048, 4096)
QUICK_LENGTHS = (48, 96)
SIDES = ("ours_on_demand", "ours_full", "transformers_forward")
WORDS = "a b c d e f g h i j k l m n o p q r s t u v w x y z "  # a token a word: 4,096 tokens in 8 KB of text
FORWARD_LLAMA = {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
                 "num_key_value_heads": 4, "max_position_embeddings": 8192}
FORWARD_QUICK = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "max_position_embeddings": 512}
FORWARD_TOKENS, FORWARD_QUICK_TOKENS = 4096, 256
FORWARD_GOAL = 1.5  # issue 62: the trace plus one head's map within 1.5x of transformers' sdpa forward
FORWARD_MEMORY_GB = 3.0  # issue 62: the trace's peak memory still under 3 GB


def prompt_of(tokenizer: Any, n: int) -> str:
    """Text of exactly `n` tokens (cut at a token, decoded; checked by the child against our own encoding)."""
    return tokenizer.decode(tokenizer(WORDS * (n // 20 + 1)).input_ids[:n])


def maps_gb(config: dict, n: int) -> float:
    """What every map of an n-token pass holds alone, in GB: layers x heads x n² x 4 B."""
    return config["num_hidden_layers"] * config["num_attention_heads"] * n * n * 4 / 1e9


def available_gb() -> float:
    """The memory available now (``MemAvailable``), in GB."""
    return available_bytes("cpu") / 1e9


def timed_calls(fn: Callable[[], Any], runs: int) -> tuple[float | None, list[float]]:
    """The peak memory the first call adds (MB) and every call's milliseconds (the call's own, not the reset of the
    peak around the first)."""
    times: list[float] = []

    def clocked() -> None:
        start = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - start))
    peak = peak_added_mb(clocked, torch.device("cpu"))
    for _ in range(runs - 1):
        clocked()
    return peak, times


def measured(peak: float | None, times: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(times), 1), "times_ms": [round(t, 1) for t in times],
            "peak_added_mb": peak}


def run_child(args: argparse.Namespace) -> int:
    """One side at one length, in this fresh process: its measurements as one JSON line."""
    import transformers

    side, folder, out, n = args.child[0], Path(args.child[1]), Path(args.child[2]), int(args.child[3])
    ours = viz_model.load(out, device="cpu")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    text = prompt_of(tokenizer, n)
    ids = ours.encode(text)
    if ids != tokenizer(text).input_ids:
        raise SystemExit("the two tokenizers give different ids for the long prompt")
    found: dict[str, Any] = {"tokens": len(ids)}
    if side == "transformers_forward":
        theirs = transformers.Qwen2ForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
        source = torch.tensor([ids])

        def forward() -> Any:
            with torch.inference_mode():
                return theirs(source, output_attentions=True)
        forward()  # warm
        found["forward"] = measured(*timed_calls(forward, args.runs))
    else:
        mode = "on_demand" if side == "ours_on_demand" else "full"

        def trace() -> viz_model.AttentionTrace:
            return ours.trace(text, max_new_tokens=0, maps=mode)
        trace()  # warm
        found["trace"] = measured(*timed_calls(trace, args.runs))
        kept = trace()
        found["trace_mb"] = round(kept.nbytes / 2 ** 20, 1)
        layer = len(kept.decoder_attentions) // 2
        for name, read in (("head", lambda: kept.head_map("decoder", layer, 0)),
                           ("layer", lambda: kept.decoder_attentions[layer])):
            read()  # warm
            found[name] = measured(*timed_calls(read, args.runs))
    print(json.dumps(found))
    return 0


def forward_child(args: argparse.Namespace) -> int:
    """Ours (trace on demand plus one head's map) against transformers' sdpa forward, alternating, in this fresh
    process: the measurements as one JSON line."""
    import transformers

    folder, out, n = Path(args.child[1]), Path(args.child[2]), int(args.child[3])
    ours = viz_model.load(out, device="cpu")
    theirs = transformers.LlamaForCausalLM.from_pretrained(folder, attn_implementation="sdpa").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    text = tokenizer.decode(tokenizer(WORDS * (n // 20 + 1)).input_ids[1:n])  # after <s>: the tokenizer adds it
    ids = ours.encode(text)
    if ids != tokenizer(text).input_ids:
        raise SystemExit("the two tokenizers give different ids for the long prompt")
    source = torch.tensor([ids])
    layer = len(ours.network.layers) // 2
    kept: dict[str, Any] = {}

    def forward() -> Any:
        with torch.inference_mode():
            kept["logits"] = theirs(source).logits[0]

    def trace() -> Any:
        kept["trace"] = ours.trace(text, max_new_tokens=0, maps="on_demand")
        kept["head"] = kept["trace"].head_map("decoder", layer, 0)
    sides = {"ours_trace_and_head": trace, "transformers_sdpa_forward": forward}
    for fn in sides.values():  # warm
        fn()
    peaks, times = {}, {name: [] for name in sides}
    for run in range(args.runs):
        for name in (sides if run % 2 == 0 else reversed(list(sides))):
            clocked = timed_calls(sides[name], 1)
            peaks.setdefault(name, clocked[0])  # the first timed call's
            times[name] += clocked[1]
    best = torch.softmax(kept["logits"].float(), dim=-1).max(dim=-1).values
    ours_best = torch.tensor([step.top_probabilities[0] for step in kept["trace"].steps])
    differs = float((best - ours_best).abs().max())
    if differs > 1e-4:
        raise SystemExit(f"ours and transformers' top probabilities differ by up to {differs:.2e}: not the same model")
    found = {"tokens": len(ids), "layer_read": layer, "top_probability_max_difference": differs,
             "trace_mb": round(kept["trace"].nbytes / 2 ** 20, 1),
             "ours_forward_ms": round(kept["trace"].timings["decode_ms"], 1)}
    found |= {name: measured(peaks[name], times[name]) for name in sides}
    print(json.dumps(found))
    return 0


def run_forward(args: argparse.Namespace) -> int:
    """The issue-62 comparison (``--forward``): build, import, one child process, the results file."""
    sys.path[:0] = [str(REPO / "tests")]  # the tests' Llama folder and its byte-level BPE
    from support.hf_lm import build_lm_folder

    n = FORWARD_QUICK_TOKENS if args.quick and args.tokens is None else args.tokens or FORWARD_TOKENS
    runs = 1 if args.quick else args.runs
    settings = FORWARD_QUICK if args.quick else FORWARD_LLAMA
    monitor = CpuMonitor(children=True)
    found: dict[str, Any] = {"model": "12-layer Llama (d 768, 12 heads, 4 key/value heads, d_ff 2048)" +
                             (" (quick: tiny)" if args.quick else ""), "settings": settings,
                             "weights": "random, seed 0", "dtype": "fp32", "device": "cpu", "runs": runs,
                             "threads": args.threads, "quick": args.quick, "goal_ratio": FORWARD_GOAL,
                             "memory_goal_gb": FORWARD_MEMORY_GB, "load_average_before": load_average()}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_lm_folder(Path(tmp), "llama", folder_name="hf", **settings)
        out = Path(tmp) / "imported"
        import_model(str(folder), out)
        command = [sys.executable, str(Path(__file__).resolve()), "--child", "forward", str(folder), str(out),
                   str(n), "--runs", str(runs), "--threads", str(args.threads)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SystemExit(f"the forward child ({n} tokens) failed: {result.stderr[-2000:]}")
        found |= json.loads(result.stdout.strip().splitlines()[-1])
    ours, theirs = found["ours_trace_and_head"], found["transformers_sdpa_forward"]
    found["ratio_p50"] = round(ours["p50_ms"] / theirs["p50_ms"], 3)
    found["ratio_per_run"] = [round(a / b, 3) for a, b in zip(ours["times_ms"], theirs["times_ms"])]
    found["met"] = found["ratio_p50"] <= FORWARD_GOAL and (ours["peak_added_mb"] or 0) < FORWARD_MEMORY_GB * 1024
    finish_results(args, found, "bench_long_prompt_forward.json", monitor, start)
    lines = [f"{found['tokens']} tokens, {runs} runs, load average {found['load_average_before']} -> "
             f"{found['load_average_after']}",
             f"ours (trace + one head): {ours['p50_ms']:.0f} ms, peak {ours['peak_added_mb']} MB",
             f"transformers sdpa forward: {theirs['p50_ms']:.0f} ms, peak {theirs['peak_added_mb']} MB",
             f"ratio {found['ratio_p50']:.2f}x (goal {FORWARD_GOAL}x): {'met' if found['met'] else 'not met'}"]
    emit("\n".join(lines), found, args.json)
    return 0


def child(side: str, folder: Path, out: Path, n: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", side, str(folder), str(out), str(n),
               "--runs", str(args.runs), "--threads", str(args.threads)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the child ({side}, {n} tokens) failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def table(found: dict) -> str:
    lines = [f"{'tokens':>7} {'side':22} {'trace ms':>10} {'peak MB':>9} {'kept MB':>9} {'head ms':>9} "
             f"{'layer ms':>9} {'layer MB':>9}"]
    for n, sides in found["lengths"].items():
        for side, r in sides.items():
            if "not_run" in r:
                lines.append(f"{n:>7} {side:22} {r['not_run']}")
                continue
            main = r.get("trace") or r["forward"]
            head, layer = r.get("head", {}), r.get("layer", {})
            cells = (main["peak_added_mb"], r.get("trace_mb", "-"), head.get("p50_ms", "-"), layer.get("p50_ms", "-"),
                     layer.get("peak_added_mb", "-"))
            lines.append(f"{n:>7} {side:22} {main['p50_ms']:10.1f} " + " ".join(f"{c!s:>9}" for c in cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="timed calls of each side (default 3)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    parser.add_argument("--memory-limit-gb", type=float, default=None,
                        help="run no side whose maps alone would take more (default: half the memory available)")
    add_output_args(parser, "bench_long_prompt.json", "a tiny model, 1 run, short prompts")
    parser.add_argument("--forward", action="store_true",
                        help="issue 62: ours (trace + a head's map) against transformers' sdpa forward, 12-layer Llama")
    parser.add_argument("--tokens", type=int, default=None,
                        help=f"--forward's prompt in tokens (default {FORWARD_TOKENS}; quick: {FORWARD_QUICK_TOKENS})")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.child:
        return forward_child(args) if args.child[0] == "forward" else run_child(args)
    if args.forward:
        return run_forward(args)
    if args.quick:
        args.runs, args.lengths = 1, list(QUICK_LENGTHS)
    if any(n < 2 for n in args.lengths) or args.runs < 1:
        parser.error("--lengths must be at least 2 tokens and --runs at least 1")
    limit = args.memory_limit_gb if args.memory_limit_gb is not None else round(available_gb() / 2, 1)
    monitor = CpuMonitor()
    found: dict[str, Any] = {"model": f"{QWEN} size" + (" (quick: tiny)" if args.quick else ""), "dtype": "fp32",
                             "device": "cpu", "runs": args.runs, "threads": args.threads, "quick": args.quick,
                             "memory_limit_gb": limit, "full_maps_max_tokens": FULL_MAPS_MAX_TOKENS,
                             "load_average_before": load_average(), "lengths": {}}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_folder(Path(tmp), QWEN, "Qwen2ForCausalLM", args.quick, torch.float32)
        out = Path(tmp) / "imported"
        import_model(str(folder), out)
        config = json.loads((folder / "config.json").read_text()) | (QUICK[QWEN] if args.quick else {})
        for n in args.lengths:
            estimate = maps_gb(config, n)
            sides = found["lengths"][n] = {"maps_estimate_gb": round(estimate, 3)}
            for side in args.sides:
                if side != "ours_on_demand" and estimate > limit:
                    sides[side] = {"not_run": f"not run: would need {estimate:.3g} GB of maps (limit {limit} GB)"}
                else:
                    sides[side] = child(side, folder, out, n, args)
                print(n, side, json.dumps(sides[side]), file=sys.stderr, flush=True)
    finish_results(args, found, "bench_long_prompt.json", monitor, start)
    emit(table({"lengths": {n: {k: v for k, v in s.items() if isinstance(v, dict)}
                            for n, s in found["lengths"].items()}}), found, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
