"""benchmarks/bench_patching.py runs (its --quick smoke run: a tiny GPT-2, one run) and writes a results file of the
shape the docs read; the committed results file is a full run's (GPT-2-small size, every head). No timing is checked
here: the figures come from the full run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "patching.json"
KEYS = {"model", "threads", "runs", "target_s", "pairs", "load_average_before", "other_cores_busy",
        "load_average_after", "wall_s", "machine"}
PAIR_KEYS = {"prompt_tokens", "shared_tokens", "heads_patched", "sweep_p50_s", "sweep_s", "cpu_p50_s", "loop_s",
             "loop_over_sweep", "max_logit_difference_gap", "under_target"}


def check_shape(result: dict) -> None:
    """What every results file of the script holds, whatever the machine measured."""
    assert set(result) >= KEYS, KEYS - set(result)
    assert {"cpu", "cores", "torch", "date"} <= set(result["machine"])
    model = result["model"]
    assert list(result["pairs"]) == ["last_word", "first_word"]
    for found in result["pairs"].values():
        assert set(found) >= PAIR_KEYS, PAIR_KEYS - set(found)
        assert found["heads_patched"] == model["layers"] * model["heads"]
        assert len(found["sweep_s"]) == result["runs"] >= 1
        assert found["sweep_p50_s"] == pytest.approx(statistics.median(found["sweep_s"]), abs=1e-3)
        assert found["loop_s"] > 0 and 0 <= found["max_logit_difference_gap"] <= 1e-4  # the batches equal the loop
        assert found["under_target"] == (found["sweep_p50_s"] < result["target_s"])
    last, first = result["pairs"]["last_word"], result["pairs"]["first_word"]
    assert first["shared_tokens"] == 0 < last["shared_tokens"] < last["prompt_tokens"]


@pytest.mark.slow
def test_the_quick_run_patches_every_head_of_a_tiny_gpt2_and_writes_its_results(tmp_path):
    out = tmp_path / "patching.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_patching.py"), "--quick", "--json",
                          "--out", str(out)], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = json.loads(run.stdout)
    assert json.loads(out.read_text()) == printed
    check_shape(printed)
    assert (printed["model"]["layers"], printed["model"]["heads"], printed["runs"]) == (2, 4, 1)


def test_the_results_file_is_a_full_run_on_gpt2_small_size():
    result = json.loads(RESULTS.read_text(encoding="utf-8"))
    check_shape(result)
    assert {k: result["model"][k] for k in ("layers", "heads", "d_model")} == {"layers": 12, "heads": 12,
                                                                               "d_model": 768}
    assert result["runs"] >= 3 and all(18 <= found["prompt_tokens"] <= 24 for found in result["pairs"].values())
