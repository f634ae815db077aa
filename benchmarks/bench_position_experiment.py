#!/usr/bin/env python
"""Time and outcome of the length-generalisation experiment (issue 44) with its defaults on this CPU: one tiny
Transformer per positional scheme (sinusoidal, learned, rope, alibi and relative; 2 layers of 4 heads, d_model 32,
500 steps or 15 s each) trained on copy at lengths 2-8, then tested on 50 fresh sequences per length 2-16. The
page's budget for the whole experiment is 90 s (five schemes of at most 15 s of training, plus their tests); the
file says whether this run kept to it, how long each scheme took, and each scheme's accuracy by length. The same
experiment with other seeds (``--seeds``, untimed) shows how much the accuracies move with the seed alone.
Results: benchmarks/results/bench_position_experiment.json.

    python benchmarks/bench_position_experiment.py [--task copy] [--threads 1] [--seeds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from bench_common import REPO, CpuMonitor, load_average, write_results


def scores(result, name: str) -> dict:
    """One scheme's accuracies: means over the trained lengths, the first unseen one and all unseen ones."""
    s = result.settings
    seen = list(range(s.min_length, s.max_length + 1))
    return {"seen_sequence_accuracy": round(result.mean(name, seen), 3),
            "first_unseen_sequence_accuracy": round(result.mean(name, s.unseen[:1]), 3),
            "unseen_sequence_accuracy": round(result.mean(name, s.unseen), 3),
            "unseen_token_accuracy": round(result.mean(name, s.unseen, "token_accuracy"), 3),
            "longest_half_right": result.longest_half_right(name)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="copy", help="copy, reverse or shift (default: copy, the page's)")
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (default 1: two on a 2-core "
                        "machine crawl as soon as another process takes a core)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1; seed 0 is the page's, and timed")
    args = parser.parse_args()
    import torch

    from viz_model.lessons.position_experiment import PAGE_SECONDS, LengthExperiment, run_length_experiment
    from viz_model.lessons.watch_trainer import target_of

    torch.set_num_threads(args.threads)
    settings = LengthExperiment(task=args.task)
    monitor = CpuMonitor()
    result = run_length_experiment(settings, progress=lambda done, text: print(f"{done:4.0%} {text}", file=sys.stderr))
    found: dict = {"settings": dataclasses.asdict(settings), "threads": torch.get_num_threads(),
                   "page_budget_s": PAGE_SECONDS, "seconds": round(result.seconds, 1),
                   "within_budget": result.seconds <= PAGE_SECONDS,
                   "seen_lengths": list(range(settings.min_length, settings.max_length + 1)),
                   "unseen_lengths": settings.unseen, "runs": {}}
    for name, run in result.runs.items():
        found["runs"][name] = {
            "steps": run.steps, "stopped": run.stopped, "train_seconds": round(run.train_seconds, 1),
            "test_seconds": round(run.test_seconds, 1), **scores(result, name),
            "sequence_accuracy_by_length": dict(zip(map(str, settings.lengths), run.sequence_accuracy)),
            "token_accuracy_by_length": {str(n): round(a, 4) for n, a in zip(settings.lengths, run.token_accuracy)},
            "probe_right": run.probe.output == target_of(settings.task, result.probe)}
    found["summary"] = result.summary()
    found["other_cores_busy"] = monitor.other_cores()
    found["load_average"] = load_average()
    print(result.summary(), file=sys.stderr)
    print(f"{result.seconds:.1f} s in all (the page's budget: {PAGE_SECONDS:.0f} s)", file=sys.stderr)
    found["seeds"] = {"0": {name: scores(result, name) for name in result.runs}}
    for seed in range(1, args.seeds):
        other = run_length_experiment(dataclasses.replace(settings, seed=seed))
        found["seeds"][str(seed)] = {name: scores(other, name) for name in other.runs}
        print(f"seed {seed}:\n{other.summary()}", file=sys.stderr)
    found["seed_range"] = {name: {key: [min(s[name][key] for s in found["seeds"].values()),
                                        max(s[name][key] for s in found["seeds"].values())]
                                  for key in ("seen_sequence_accuracy", "first_unseen_sequence_accuracy",
                                              "unseen_sequence_accuracy", "unseen_token_accuracy")}
                           for name in result.runs}
    write_results(REPO / "benchmarks" / "results" / "bench_position_experiment.json", found)
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
