"""benchmarks/bench_fitted_families.py runs (its --quick smoke run: GPT-NeoX, 20 fitting steps, 4 prompts) and
reports what it counted; its prompts are held out from the fitting (the figures come from its full run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_fitted_families as bench  # noqa: E402
from support.hf_lm import CONFIGS, RESEARCH  # noqa: E402
from support.hf_lm_fit import seen_in_fitting  # noqa: E402


@pytest.mark.slow
def test_the_quick_run_fits_one_family_and_counts_its_continuations_and_maps():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_fitted_families.py"), "--quick", "--json"],
                         env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout)
    assert r["quick"] and r["fit_steps"] == 20 and r["prompts"] == 4 and list(r["families"]) == ["gpt_neox"]
    assert {"cpu", "cores", "torch", "date"} <= set(r["machine"]) and r["transformers"]
    found = r["families"]["gpt_neox"]
    assert found["settings"] == bench.SETTINGS["gpt_neox"] and found["heads"] == 3 and found["parameters"] > 0
    for search in ("greedy", "beam4"):
        counted = found[search]
        assert counted["identical"] == 4 and counted["share"] == 1.0 and 0 <= counted["ended"] <= 4
    assert 0 <= found["worst_map_difference"] <= 1e-5
    assert found["targets_met"] and r["all_targets_met"]


def test_the_prompts_are_sentences_the_fitting_never_read():
    prompts, left_out = bench.held_out(100, 300)
    seen = seen_in_fitting(300)
    assert len(prompts) == len(set(prompts)) == 100 and all(p.endswith(" =") for p in prompts)
    assert not {p[:-2] for p in prompts} & seen and left_out > 0  # 2-word sentences recur: some were read


def test_each_research_family_has_a_config_the_tests_have_not_seen():
    assert set(bench.SETTINGS) == set(RESEARCH)
    for name, settings in bench.SETTINGS.items():
        tested = CONFIGS[name][2]
        assert any(tested.get(key) != value for key, value in settings.items()), name
        assert settings.get("hidden_size") != tested.get("hidden_size", 32), name
