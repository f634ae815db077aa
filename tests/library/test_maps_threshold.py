"""`FULL_MAPS_MAX_TOKENS` is what `benchmarks/bench_maps_threshold.py`'s rule gives on its results file (a visit with
every map kept against one with maps on demand, CPU, fp32, GPT-2-small and Qwen2.5-0.5B sizes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_maps_threshold  # noqa: E402

from viz_model.on_demand import FULL_MAPS_MAX_TOKENS  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "bench_maps_threshold.json"


def test_the_threshold_is_what_the_benchmarks_rule_gives_on_its_results_file():
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert not results["quick"] and results["rule"] == bench_maps_threshold.RULE
    assert set(results["models"]) == {"gpt2-small", "qwen2.5-0.5b"}
    for model in results["models"].values():
        assert sorted(map(int, model["lengths"])) == list(bench_maps_threshold.LENGTHS)
    assert bench_maps_threshold.threshold(results) == results["threshold"]
    if results["other_cores_busy"] is None or results["other_cores_busy"] > bench_maps_threshold.QUIET:
        pytest.skip(f"bench_maps_threshold.json was measured while other processes kept {results['other_cores_busy']} "
                    "cores busy: re-run it on a quiet machine to decide FULL_MAPS_MAX_TOKENS")
    assert results["threshold"] == FULL_MAPS_MAX_TOKENS


def results_of(full_ms: dict[str, list[float]]) -> dict:
    """A results file's models whose visits take `full_ms` (per model, a length each) with every map kept, 100 ms on
    demand."""
    return {"models": {name: {"lengths": {str(n): {"full": {"visit_p50_ms": ms}, "on_demand": {"visit_p50_ms": 100}}
                                          for n, ms in zip(bench_maps_threshold.LENGTHS, times)}}
                       for name, times in full_ms.items()}}


def test_the_rule_keeps_the_largest_length_where_full_is_faster_on_both_models_every_shorter_one_too():
    threshold = bench_maps_threshold.threshold
    assert threshold(results_of({"a": [50] * 5, "b": [89.9] * 5})) == 1024
    assert threshold(results_of({"a": [50, 50, 95, 50, 50], "b": [50] * 5})) == 128  # 512 passes again: too late
    assert threshold(results_of({"a": [50] * 5, "b": [90, 50, 50, 50, 50]})) == 0  # not 10% faster at 64: none
