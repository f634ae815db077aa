#!/usr/bin/env python
"""Time of the two live long-context experiments on the shipped language model at the pages' defaults (issue 61):
sink eviction on the Attention sinks page (the page's long text, 256 tokens, a window of 32, 0, 1, 2, 4 and 8 sinks
kept: StreamingLLM's cache rule, token by token) and RoPE's scalings past the trained length on the Positional page
(twice the trained length, the page's default; linear, dynamic NTK, YaRN and llama3 at a factor of 4, one pass
each).

Each is run `--runs` times, timed on the wall clock and in CPU time of this process (`time.process_time`: on a busy
machine the CPU time is nearer what an idle core would take); the results file also keeps each experiment's numbers
(perplexities, mean losses), which the docs quote.
Results: benchmarks/results/live_experiments.json.

    python benchmarks/bench_live_experiments.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench_common import REPO, load_average, publish

import viz_model
from viz_model.analysis.sink_eviction import KEPT, PAPER, sink_eviction
from viz_model.lessons.position_length import recorded_length, text_ids
from viz_model.lessons.position_scaling import SCALINGS, losses_by_scaling
from viz_model.modeldir.shipped import SHIPPED_LANGUAGE_MODEL

EVICTION = {"tokens": 256, "window": 32}  # the Attention sinks page's defaults (app/page_settings.py SINKS)
SCALING = {"factor": 4.0}  # the Positional page's, over twice the trained length (its default tokens)
BUDGET_S = 5.0  # "a few seconds" on a laptop CPU


def timed(run, runs: int) -> tuple[dict, object]:
    """`run()` `runs` times: the median wall and CPU seconds, and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3),
            "runs": runs}, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print the results, leave the file as it is")
    args = parser.parse_args()
    model = viz_model.load(SHIPPED_LANGUAGE_MODEL, device="cpu")
    ids = text_ids(model)
    load_before = load_average()
    eviction_time, eviction = timed(lambda: sink_eviction(model, ids[:EVICTION["tokens"]], EVICTION["window"], KEPT),
                                    args.runs)
    masked_time, masked = timed(lambda: sink_eviction(model, ids[:EVICTION["tokens"]], EVICTION["window"], KEPT,
                                                      rule="text"), args.runs)
    trained = recorded_length(model)
    tokens = min(len(ids), 2 * trained)  # the page's default (position_lm_tabs.length_tab)
    scaling_time, runs = timed(lambda: losses_by_scaling(model, ids, tokens, SCALING["factor"]), args.runs)
    result = {
        "model": SHIPPED_LANGUAGE_MODEL, "budget_s": BUDGET_S, "load_average_before": load_before,
        "load_average_after": load_average(),
        "sink_eviction": {**EVICTION, "kept": list(KEPT), "rule": "cache", **eviction_time,
                          "perplexity": {k: round(v, 2) for k, v in eviction.perplexities().items()},
                          "paper": PAPER},
        "sink_eviction_text_rule": {**EVICTION, "rule": "text", **masked_time,
                                    "perplexity": {k: round(v, 2) for k, v in masked.perplexities().items()}},
        "rope_scalings": {"tokens": tokens, **SCALING, "trained": trained, "scalings": list(SCALINGS), **scaling_time,
                          "mean_loss_within": {k: round(float(np.mean(r.losses[:trained])), 3)
                                               for k, r in runs.items()},
                          "mean_loss_past": {k: round(float(np.mean(r.losses[trained:])), 3)
                                             for k, r in runs.items()}},
    }
    publish(REPO / "benchmarks" / "results" / "live_experiments.json", result, not args.no_write)


if __name__ == "__main__":
    main()
