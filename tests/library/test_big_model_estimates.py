"""The estimates `benchmarks/bench_big_model.py` records (and docs/long-prompts.md quotes) are what the memory estimate
gives now for the traces the script names: Llama-3.1-8B's config in bf16 sparse shards (no weights read), a 512-token
trace with every map kept, on a GPU and on the CPU (the estimate alone: no GPU needed, nothing traced); the GPU run's
file (``bench_big_model_cuda.json``) holds the same estimates and peaks within the GPU test's tolerance of them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_big_model  # noqa: E402
from test_gpu_big_model import TOLERANCE  # noqa: E402

from viz_model.hf.importer import import_model  # noqa: E402
from viz_model.hf.sparse_folder import LLAMA_3_1_8B, sparse_llama_folder  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "bench_big_model.json"
GPU_RESULTS = RESULTS.with_name("bench_big_model_cuda.json")
PARTS = ("total", "weights", "cache", "maps", "activations", "logits", "trace", "weights_held", "compute_dtype",
         "maps_mode", "summary")


@pytest.mark.slow
def test_the_recorded_8b_estimates_are_what_the_script_estimates_now(tmp_path):
    recorded = json.loads(RESULTS.read_text(encoding="utf-8"))["estimates"]
    directory = import_model(str(sparse_llama_folder(tmp_path / "hf", LLAMA_3_1_8B, torch.bfloat16)), tmp_path / "lm")
    for name, device in (("8b_bf16_gpu_512", "cuda"), ("8b_bf16_cpu_512", "cpu")):
        now = bench_big_model.estimated(directory, 512, device)
        assert {p: now[p] for p in PARTS} == {p: recorded[name][p] for p in PARTS}, name
    assert recorded["8b_bf16_gpu_512"]["maps_mode"] == "full"  # what the docs say: every map kept


def test_the_gpu_run_recorded_the_same_estimates_and_peaks_within_a_quarter_of_them():
    cpu, gpu = (json.loads(path.read_text(encoding="utf-8")) for path in (RESULTS, GPU_RESULTS))
    assert gpu["machine"].get("gpu") and isinstance(gpu["gpu"], dict), gpu["machine"]
    for name in cpu["estimates"]:
        assert {p: gpu["estimates"][name][p] for p in PARTS} == {p: cpu["estimates"][name][p] for p in PARTS}, name
    for run, estimate in (("8b_bf16_512", "8b_bf16_gpu_512"), ("1b_bf16_4096", "1b_bf16_gpu_4096")):
        peak, total = gpu["gpu"][run]["peak_gpu_gb"], gpu["estimates"][estimate]["total"]
        assert abs(total / peak - 1) <= TOLERANCE  # both in GiB, (run, total, peak)
        assert gpu["gpu"][run]["weights_dtype"] == "bfloat16"
