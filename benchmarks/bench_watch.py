#!/usr/bin/env python
"""Speed of the "watch attention form" lesson (issue 25) on this CPU: training steps per second and the time to
99% held-out sequence accuracy for copy and reverse with the page's defaults (800 steps, 1 layer, 2 heads, d_model 32,
lengths 4-8, 10 symbols, sinusoidal PE, snapshots every 50 steps), and reverse without positional encoding for the
contrast. The accuracy is measured at each snapshot, so the time to 99% is that of the first snapshot at or above
it (evaluation included: what a learner waits for). Results: benchmarks/results/bench_watch.json.

    python benchmarks/bench_watch.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from bench_common import REPO, CpuMonitor, load_average, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="budget of each run (the page's default: 30)")
    args = parser.parse_args()
    from viz_model.lessons.watch_trainer import WatchConfig, train_watch

    monitor = CpuMonitor()
    found: dict = {"budget_s": args.seconds, "runs": {}}
    for task, positional in (("copy", "sinusoidal"), ("reverse", "sinusoidal"), ("reverse", "none")):
        cfg = dataclasses.replace(WatchConfig(task=task, positional=positional), seconds=args.seconds)
        times: dict[int, float] = {}
        result = train_watch(cfg, on_progress=lambda r, times=times: times.setdefault(r.snapshots[-1].step, r.seconds))
        reached = next((h["step"] for h in result.history if h["sequence_accuracy"] >= 0.99), None)
        steps = result.history[-1]["step"]
        found["runs"][f"{task}, {positional} PE"] = {
            "steps": steps, "seconds": round(result.seconds, 1), "steps_per_s": round(steps / result.seconds, 1),
            "final_sequence_accuracy": round(result.final_accuracy, 3),
            "step_to_99": reached, "seconds_to_99": None if reached is None else round(times[reached], 1)}
    found["other_cores_busy"] = monitor.other_cores()
    found["load_average"] = load_average()
    for name, run in found["runs"].items():
        print(f"{name}: {run['steps_per_s']} steps/s; 99% after "
              + (f"{run['step_to_99']} steps, {run['seconds_to_99']} s" if run["step_to_99"] is not None
                 else f"never (final accuracy {run['final_sequence_accuracy']:.1%})"), file=sys.stderr)
    path = REPO / "benchmarks" / "results" / "bench_watch.json"
    write_results(path, found)
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
