#!/usr/bin/env python
"""Speed and outcome of the induction-heads run on "Watch attention form" (issue 52) on this CPU: the page's default
`InductionConfig` (2 attention-only layers, one thread), trained to its step count whatever the time it takes; the
time to the phase change (the first measurement where a head's induction score reaches 0.5) and the scores and
losses before and after. Results: benchmarks/results/bench_induction.json.

    python benchmarks/bench_induction.py [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from bench_common import REPO, CpuMonitor, load_average, write_results

FORMED = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (the page's default: 0)")
    args = parser.parse_args()
    from viz_model.lessons.induction_run import MAX_SECONDS, InductionConfig, train_induction

    monitor = CpuMonitor()
    cfg = dataclasses.replace(InductionConfig(), seconds=MAX_SECONDS, seed=args.seed)
    times: dict[int, float] = {}
    result = train_induction(cfg, on_progress=lambda r: times.setdefault(r.snapshots[-1].step, r.seconds))
    first, last = result.snapshots[0], result.snapshots[-1]
    formed = next((s.step for s in result.snapshots if s.induction.max() >= FORMED), None)
    layer, head = result.best_head()
    found = {
        "config": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "seconds"},
        "steps": last.step, "stopped": result.stopped, "seconds": round(result.seconds, 1),
        "steps_per_s": round(last.step / result.seconds, 1),
        "formed_at_step": formed, "seconds_to_formed": None if formed is None else round(times[formed], 1),
        "best_head": {"layer": layer + 1, "head": head + 1},
        "induction_before": round(float(first.induction[layer, head]), 3),
        "induction_after": round(float(last.induction[layer, head]), 3),
        "previous_token_after": round(float(last.previous[:layer].max()), 3) if layer else None,
        "loss_repeat_before": round(first.loss_repeat, 3), "loss_repeat_after": round(last.loss_repeat, 3),
        "loss_first_after": round(last.loss_first, 3), "chance_loss": round(result.chance_loss, 3),
        "other_cores_busy": monitor.other_cores(), "load_average": load_average(),
    }
    print(f"{found['steps']} steps in {found['seconds']} s ({found['steps_per_s']} steps/s); induction score "
          f"{found['induction_before']} -> {found['induction_after']}, formed at step {formed} "
          f"({found['seconds_to_formed']} s)", file=sys.stderr)
    path = REPO / "benchmarks" / "results" / "bench_induction.json"
    write_results(path, found)
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
