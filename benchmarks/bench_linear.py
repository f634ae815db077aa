#!/usr/bin/env python
"""oneDNN's linear kernel against ``F.linear`` by the weight's size (the rule `viz_model.nn.linear.ONEDNN_MIN_WEIGHT`
sets): microseconds a call, float32 on the CPU, one torch thread, inference mode, for square-ish and wide weights
and 1, 4 and 22 rows (a greedy step, a beam of 4, a sentence). The two kernels are timed in turn (A B A B ...) and
the median of --rounds rounds is kept. oneDNN reorders an unpacked weight on every call: a fixed cost of tens of
microseconds that only large weights repay. Results: ``benchmarks/results/bench_linear.json`` (``--out`` elsewhere).

    python benchmarks/bench_linear.py [--rounds 7]
    python benchmarks/bench_linear.py --quick --json     # smoke test: three shapes, three rounds
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from bench_common import CpuMonitor, add_output_args, emit, finish_results

from viz_model.nn.linear import ONEDNN_MIN_WEIGHT, onednn_available

SHAPES = [(32, 32), (128, 32), (64, 64), (256, 64), (128, 128), (512, 128), (256, 256), (1024, 128), (512, 256),
          (768, 256), (1024, 256), (512, 512), (2048, 256), (768, 768), (2048, 512), (3072, 768), (8000, 256),
          (32000, 512)]
QUICK_SHAPES = [(32, 32), (1024, 256), (8000, 256)]
ROWS = (1, 4, 22)


def per_call_us(kernel, calls: int) -> float:
    begin = time.perf_counter()
    for _ in range(calls):
        kernel()
    return (time.perf_counter() - begin) / calls * 1e6


def measure(out: int, inp: int, rows: int, rounds: int) -> dict:
    """Both kernels' median microseconds a call on an `out` x `inp` weight (with a bias) and `rows` rows."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(rows, inp), torch.randn(out, inp), torch.randn(out)
    onednn = lambda: torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")  # noqa: E731
    plain = lambda: F.linear(x, weight, bias)  # noqa: E731
    calls = max(5, min(400, int(4e6 / (out * inp))))
    times = {"onednn": [], "f_linear": []}
    with torch.inference_mode():
        onednn(), plain()  # warm-up
        for _ in range(rounds):
            times["onednn"].append(per_call_us(onednn, calls))
            times["f_linear"].append(per_call_us(plain, calls))
    found = {name: round(statistics.median(values), 1) for name, values in times.items()}
    return {"weight": [out, inp], "elements": out * inp, "rows": rows, **{f"{k}_us": v for k, v in found.items()},
            "faster": min(found, key=found.get)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    add_output_args(parser, "bench_linear.json", "three shapes, three rounds")
    args = parser.parse_args()
    if not onednn_available():
        raise SystemExit("bench: this PyTorch has no oneDNN linear kernel")
    torch.set_num_threads(1)
    monitor, start = CpuMonitor(), time.perf_counter()
    rounds = 3 if args.quick else args.rounds
    rows = [measure(o, i, r, rounds) for o, i in (QUICK_SHAPES if args.quick else SHAPES) for r in ROWS]
    found = {"threads": 1, "rounds": rounds, "onednn_min_weight": ONEDNN_MIN_WEIGHT, "shapes": rows}
    finish_results(args, found, "bench_linear.json", monitor, start)
    lines = [f"{'weight':>12} {'rows':>4} {'oneDNN us':>10} {'F.linear us':>12}  faster"]
    lines += [f"{r['weight'][0]:>6}x{r['weight'][1]:<5} {r['rows']:>4} {r['onednn_us']:>10} {r['f_linear_us']:>12}  "
              f"{r['faster']}" for r in rows]
    emit("\n".join(lines), found, args.json)


if __name__ == "__main__":
    main()
