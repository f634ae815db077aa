"""The estimates `benchmarks/bench_big_model.py` records (and docs/long-prompts.md quotes) are what the memory estimate
gives now for the traces the script names: Llama-3.1-8B's config in bf16 sparse shards (no weights read), a 512-token
trace with every map kept, on a GPU and on the CPU (the estimate alone: no GPU needed, nothing traced)."""

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

from viz_model.hf.importer import import_model  # noqa: E402
from viz_model.hf.sparse_folder import LLAMA_3_1_8B, sparse_llama_folder  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "bench_big_model.json"
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
