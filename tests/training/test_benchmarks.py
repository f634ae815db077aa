"""Smoke tests of the benchmark scripts: they run, on tiny settings, and report what they measured (CI times
nothing; the figures come from full runs on an idle machine)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
import torch
from support.data import tiny_train_config, write_toml

from viz_model.train.runtime import native_bf16

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_benchmark(capsys, monkeypatch):
    """`run_benchmark(SCRIPT, *ARGS)`: the JSON that ``python benchmarks/SCRIPT ARGS --json`` prints, from the
    script's `main` run in this process (what the script runs and exits with; no interpreter start and imports),
    from the repository root with one torch thread; the processes it starts itself find this checkout."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # as running a script puts its folder first
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.chdir(REPO)

    def run(script: str, *args: str) -> dict:
        capsys.readouterr()
        code = runpy.run_path(str(REPO / "benchmarks" / script), run_name="benchmark")["main"]([*args, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err[-3000:]
        return json.loads(out)
    return run


@pytest.mark.slow
@pytest.mark.parametrize("baseline_bf16", [False, True])
def test_bench_train_reports_both_systems_and_their_ratio(tmp_path, data_dir, baseline_bf16, run_benchmark):
    """With a config of bf16 = false, ours runs fp32; --baseline-bf16 still gives the baseline bf16 autocast where
    the device has native bf16 (and says so on stderr where it has not)."""
    config = tmp_path / "tiny.toml"
    write_toml(config, tiny_train_config(data_dir))
    r = run_benchmark("bench_train.py", "--synthetic", "--config", str(config), "--quick", "--batch-tokens", "250",
                      "--threads", "1", "--device", "cpu", *(["--baseline-bf16"] if baseline_bf16 else []))
    assert r["steps"] == 3 and r["warmup"] == 1 and r["threads"] == 1
    assert r["config"]["d_model"] == 32  # the config's model, not the reference size
    # the same model size (nn.Transformer adds a final LayerNorm to each stack)
    assert r["params_ours"] == pytest.approx(r["params_baseline"], rel=0.01)
    ours, base = r["ours"]["tokens_per_s"], r["baseline"]["tokens_per_s"]
    assert ours > 0 and base > 0 and r["ratio"] == pytest.approx(ours / base, rel=1e-2)
    assert r["precision_ours"] == "fp32"
    expected = "bf16 autocast" if baseline_bf16 and native_bf16(torch.device("cpu")) else "fp32"
    assert r["precision_baseline"] == expected


def _library_imports(path: Path) -> list[tuple[str, str]]:
    """Every ``from viz_model... import name`` in a script, the ones inside functions too."""
    import ast

    return [(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "viz_model"
            for alias in node.names]


@pytest.mark.parametrize("script", sorted((REPO / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_every_name_a_benchmark_imports_from_the_library_exists(script):
    """The heavy benchmarks (an opus-mt-size model, a corpus run) are not run here: at least the library names they
    import, often inside main(), must exist (a renamed function broke bench_hf.py unnoticed)."""
    import importlib

    for module, name in _library_imports(script):
        assert hasattr(importlib.import_module(module), name), f"{script.name}: {module}.{name} does not exist"


def test_library_imports_finds_imports_inside_functions(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import os\ndef main():\n    from viz_model.hf.importer import import_marian\n")
    assert _library_imports(script) == [("viz_model.hf.importer", "import_marian")]


@pytest.mark.slow
def test_bench_lm_compares_identical_continuations_and_reports_ratios(run_benchmark):
    """Tiny GPT-2 and Qwen2 models (fp32, CPU) over the quick prompt set (the first held-out caption, where the data
    root has them, and the first mixed text): both systems' continuations equal, each prompt's ratio consistent with
    its medians, the set's median and worst from the prompts' ratios, the long prompt's time and peak memory on both
    sides."""
    r = run_benchmark("bench_lm.py", "--quick", "--threads", "1")
    assert r["quick"] and r["device"] == "cpu" and r["dtype"] == "fp32" and set(r["models"]) == {"gpt2-small",
                                                                                                 "qwen2.5-0.5b"}
    for found in r["models"].values():
        assert found["continuations_identical"] and found["new_tokens"] >= 1
        rows = found["per_prompt"]
        assert found["prompts"] == len(rows) in (1, 2) and rows[-1]["kind"] == "mixed"
        assert rows[-1]["prompt_tokens"] >= 30 and all(row["new_tokens"] >= 1 for row in rows)
        for other in ("transformers_eager", "transformers_sdpa_generate"):
            ratio = found[f"speedup_vs_{other}"]
            assert ratio["min"] <= ratio["median"] <= ratio["max"]
            assert ratio["min"] == min(row[f"speedup_vs_{other}"]["median"] for row in rows)
            assert rows[ratio["worst_prompt"]][f"speedup_vs_{other}"]["median"] == ratio["min"]
            for row in rows:
                ratio = row[f"speedup_vs_{other}"]
                assert ratio["min"] <= ratio["median"] <= ratio["max"]
                # the medians' ratio lies between the paired runs' smallest and largest ratio (a_i <= max * b_i for
                # every run, so median(a) <= max * median(b)); the slack is the file's rounding to 0.01 and 0.1 ms
                of_medians = row[f"{other}_p50_ms"] / row["ours_p50_ms"]
                slack = 0.005 + 0.05 / row["ours_p50_ms"] * (1 + of_medians)
                assert ratio["min"] - slack <= of_medians <= ratio["max"] + slack
        long = found["long_prompt"]
        assert 40 <= long["tokens"] <= 48 and long["ours_p50_ms"] > 0 and long["transformers_forward_p50_ms"] > 0
        assert long["ours_peak_added_mb"] is None or long["ours_peak_added_mb"] >= 0
