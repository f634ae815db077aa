"""Big models on a CUDA GPU in bf16 (issue 53): Llama-3.1-8B's config traces a 512-token prompt (every map kept) and
Llama-3.2-1B's a 4,096-token prompt (maps on demand), both from sparse shards (zero weights, norms one: every map
uniform over the keys a query sees), the peak GPU memory within the estimate's 25%. Their times are written by
``benchmarks/bench_big_model.py`` on a GPU. Device: CUDA (skipped without one); precision: bf16."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from bench_big_model import MAPS  # noqa: E402

import viz_model  # noqa: E402
from viz_model.analysis.memory_estimate import directory_estimate  # noqa: E402
from viz_model.hf.importer import import_model  # noqa: E402
from viz_model.hf.sparse_folder import LLAMA_3_1_8B, LLAMA_3_2_1B, sparse_llama_folder  # noqa: E402

pytestmark = pytest.mark.gpu
TOLERANCE = 0.25
ROW_TOLERANCE = 1e-2  # bf16 maps: 8 bits of mantissa


def traced(tmp_path, values: dict, n: int):
    """The model of `values` in bf16 sparse shards, imported, loaded on the GPU and traced over `n` tokens (its maps
    as `bench_big_model.MAPS` names them); the trace, the estimate of its directory and the peak GPU memory of the
    trace with the model open."""
    directory = import_model(str(sparse_llama_folder(tmp_path / "hf", values, torch.bfloat16)), tmp_path / "lm")
    lm = viz_model.load(directory, device="cuda")
    assert next(lm.network.parameters()).dtype == torch.bfloat16
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    trace = lm.trace(" the" * n, max_new_tokens=0, maps=MAPS[n])
    torch.cuda.synchronize()
    return (trace, directory_estimate(directory, len(trace.target_ids), MAPS[n], device="cuda"),
            torch.cuda.max_memory_allocated())


def assert_uniform(rows: np.ndarray) -> None:
    """Zero weights: each row of a causal map spreads evenly over its visible keys."""
    n = rows.shape[-1]
    expected = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    np.testing.assert_allclose(rows, np.broadcast_to(expected, rows.shape), atol=ROW_TOLERANCE)


def test_llama_3_1_8b_traces_512_tokens_in_bf16(tmp_path):
    trace, estimate, peak = traced(tmp_path, LLAMA_3_1_8B, 512)
    assert len(trace.target_ids) >= 512 and len(trace.decoder_attentions) == 32
    assert isinstance(trace.decoder_attentions, list) and estimate.maps_mode == "full"  # every map kept
    assert trace.decoder_attentions[31].shape[0] == 32
    assert_uniform(trace.decoder_attentions[31][:2])
    assert abs(estimate.total / peak - 1) <= TOLERANCE, (estimate.summary(), peak)


def test_llama_3_2_1b_traces_4096_tokens_in_bf16_with_maps_on_demand(tmp_path):
    trace, estimate, peak = traced(tmp_path, LLAMA_3_2_1B, 4096)
    assert len(trace.target_ids) >= 4096 and estimate.maps_mode == "on_demand"
    assert_uniform(trace.head_map("decoder", 15, 0, rows=slice(0, 256))[None, :, :256])
    assert abs(estimate.total / peak - 1) <= TOLERANCE, (estimate.summary(), peak)
