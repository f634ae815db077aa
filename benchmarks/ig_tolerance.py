#!/usr/bin/env python
"""Does integrated gradients' default reach its stated tolerance on typical sentences? (issue 38)

The shipped model (``mixed-en-de``) translates Multi30K validation sentences (its own search) and attributes each
translation with integrated gradients three ways:

* ``adaptive``: the default (at most 256 points, until every output's completeness gap is within 1% of its score
  change): the points it used, its largest relative gap, whether it met the tolerance, the seconds;
* ``gauss_legendre_same_points``: fixed Gauss-Legendre with as many points as the adaptive rule used (the same cost);
* ``gauss_legendre_32``: fixed 32-point Gauss-Legendre (the default before this change).

Writes ``benchmarks/results/ig_tolerance.json`` (per sentence and summarised).

    python benchmarks/ig_tolerance.py              # the first 100 sentences, ~20 min on 2 cores
    python benchmarks/ig_tolerance.py --count 5    # a smoke run (no results file)
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from bench_common import write_results

from viz_model.config.data_root import data_root

REPO = Path(__file__).resolve().parent.parent
DATA = data_root() / "multi30k"
OUT = REPO / "benchmarks" / "results" / "ig_tolerance.json"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=REPO / "assets" / "mixed-en-de")
    p.add_argument("--count", type=int, default=100, help="the first N validation sentences (default 100)")
    args = p.parse_args()
    import torch

    import viz_model
    from viz_model.attribution import attribute
    from viz_model.attribution.gradients import DEFAULT_STEPS, DEFAULT_TOLERANCE

    torch.set_num_threads(2)
    with gzip.open(DATA / "val.en.gz", "rt", encoding="utf-8") as f:
        texts = [line.strip() for line in f][:args.count]
    model = viz_model.load(args.model, device="cpu")
    rows = []
    for number, text in enumerate(texts, 1):
        started = time.perf_counter()
        adaptive = attribute(model, text, methods=["integrated_gradients"])
        seconds = time.perf_counter() - started
        same = attribute(model, text, methods=["integrated_gradients"], steps=adaptive.steps, tolerance=0)
        old = attribute(model, text, methods=["integrated_gradients"], steps=32, tolerance=0)
        rows.append({"sentence": number, "outputs": len(adaptive.output_ids), "points": adaptive.steps,
                     "gap": round(float(adaptive.relative_gap.max()), 5), "seconds": round(seconds, 2),
                     "gauss_legendre_same_points_gap": round(float(same.relative_gap.max()), 5),
                     "gauss_legendre_32_gap": round(float(old.relative_gap.max()), 5)})
        print(rows[-1], file=sys.stderr)
    met = [r for r in rows if r["gap"] <= DEFAULT_TOLERANCE]
    summary = {
        "sentences": len(rows), "cap": DEFAULT_STEPS, "tolerance": DEFAULT_TOLERANCE,
        "adaptive_met_tolerance": len(met),
        "adaptive_points_median": statistics.median(r["points"] for r in rows),
        "adaptive_points_max": max(r["points"] for r in rows),
        "adaptive_seconds_median": round(statistics.median(r["seconds"] for r in rows), 2),
        "adaptive_seconds_max": max(r["seconds"] for r in rows),
        "adaptive_gap_max": max(r["gap"] for r in rows),
        "gauss_legendre_same_points_met_tolerance": sum(r["gauss_legendre_same_points_gap"] <= DEFAULT_TOLERANCE
                                                        for r in rows),
        "gauss_legendre_same_points_gap_median": statistics.median(r["gauss_legendre_same_points_gap"] for r in rows),
        "gauss_legendre_32_met_tolerance": sum(r["gauss_legendre_32_gap"] <= DEFAULT_TOLERANCE for r in rows),
        "gauss_legendre_32_gap_median": statistics.median(r["gauss_legendre_32_gap"] for r in rows),
    }
    result = {"model": args.model.name, "data": "multi30k val.en (first sentences)", "summary": summary,
              "torch": torch.__version__, "threads": 2, "sentences": rows}
    print(json.dumps(summary, indent=2))
    if args.count >= 100:
        write_results(OUT, result)
        print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
