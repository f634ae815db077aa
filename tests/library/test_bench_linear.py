"""benchmarks/bench_linear.py measures both kernels on a weight (in this process: one shape, one round) and its
committed results file is a full run's at the library's `ONEDNN_MIN_WEIGHT`. No timing is checked here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from viz_model.nn.linear import ONEDNN_MIN_WEIGHT, onednn_available

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_linear as bench  # noqa: E402

KEYS = {"weight", "elements", "rows", "onednn_us", "f_linear_us", "faster"}


@pytest.mark.skipif(not onednn_available(), reason="this PyTorch has no oneDNN linear kernel")
def test_a_measurement_times_both_kernels_on_one_weight():
    found = bench.measure(64, 32, 4, rounds=1)
    assert set(found) == KEYS and found["weight"] == [64, 32] and found["elements"] == 2048 and found["rows"] == 4
    assert found["onednn_us"] > 0 and found["f_linear_us"] > 0
    assert found["faster"] == ("onednn" if found["onednn_us"] < found["f_linear_us"] else "f_linear")


def test_the_committed_results_are_a_full_run_at_the_librarys_rule():
    result = json.loads((REPO / "benchmarks" / "results" / "bench_linear.json").read_text())
    assert result["onednn_min_weight"] == ONEDNN_MIN_WEIGHT and result["threads"] == 1
    assert {"cpu", "cores", "torch", "date", "load_average"} <= set(result["machine"])
    shapes = {(tuple(r["weight"]), r["rows"]) for r in result["shapes"]}
    assert shapes == {(shape, rows) for shape in bench.SHAPES for rows in bench.ROWS}
    assert all(set(r) == KEYS and r["elements"] == r["weight"][0] * r["weight"][1] for r in result["shapes"])
