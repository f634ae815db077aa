"""Why self-attention, measured live: time and peak tensor memory of one layer of each kind against the length."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ..nn.attention import MultiHeadAttention
from .lesson_inputs import InputError, whole_number

# --- why self-attention: a live measurement ----------------------------------------------------------------------
COMPLEXITY = pd.DataFrame([
    {"layer": "self-attention", "complexity per layer": "O(n²·d)", "sequential operations": "O(1)",
     "maximum path length": "O(1)"},
    {"layer": "recurrent", "complexity per layer": "O(n·d²)", "sequential operations": "O(n)",
     "maximum path length": "O(n)"},
    {"layer": "convolutional", "complexity per layer": "O(k·n·d²)", "sequential operations": "O(1)",
     "maximum path length": "O(log_k(n))"},
    {"layer": "self-attention (restricted)", "complexity per layer": "O(r·n·d)", "sequential operations": "O(1)",
     "maximum path length": "O(n/r)"},
])
LAYER_NAMES = ("self-attention (explicit weights)", "self-attention (fused kernel)", "recurrent (RNN)",
               "convolution")
MAX_MEASURE_LENGTH = 2048
MAX_MEASURE_BYTES = 256 * 2**20  # one measurement's tensors, on a server every session shares


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a function's result (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


class PeakTensorMemory(TorchFunctionMode):
    """Bytes of tensor storage created inside the block and still alive, at their peak (any device).

    Counts the results of every torch function called in the block (PyTorch's public `TorchFunctionMode`)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._seen: set[int] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for tensor in _tensors(out):
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key in self._seen or storage.nbytes() == 0:
                continue
            self._seen.add(key)
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(tensor, self._free, storage.nbytes(), key)
        return out

    def _free(self, nbytes: int, key: int) -> None:
        self.live -= nbytes
        self._seen.discard(key)


def compared_layers(d_model: int, heads: int, kernel: int) -> dict[str, Callable[[torch.Tensor], Any]]:
    """The four layers the page compares, by their `LAYER_NAMES`, each a function of a ``(1, n, d_model)`` input."""
    attn = MultiHeadAttention(d_model, heads).eval()
    rnn = nn.RNN(d_model, d_model, batch_first=True).eval()
    conv = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2).eval()
    return {
        LAYER_NAMES[0]: lambda x: attn(x, need_weights=True),
        LAYER_NAMES[1]: lambda x: attn(x),
        LAYER_NAMES[2]: lambda x: rnn(x),
        LAYER_NAMES[3]: lambda x: conv(x.transpose(1, 2)),
    }


def measure_memory_bytes(n: int, d_model: int, heads: int, kernel: int) -> int:
    """Peak memory one measurement may hold: the explicit path's scores and weights (heads x n x n, twice), the
    input and a few activations of width d, and the layers' weights (float32)."""
    return 4 * (2 * heads * n * n + 8 * n * d_model + 6 * d_model * d_model + kernel * d_model * d_model)


def measure_layers(lengths: Sequence[int], d_model: int, heads: int, kernel: int = 3, repeats: int = 5,
                   progress: Callable[[float], None] | None = None,
                   layers: Mapping[str, Callable[[torch.Tensor], Any]] | None = None) -> pd.DataFrame:
    """Time (median of `repeats`) and peak activation memory of one forward pass of each layer kind, per length.

    Self-attention is the library's `MultiHeadAttention`, with the weights materialised (the instrumented path)
    and without (the fused kernel inference uses); the recurrent layer is `nn.RNN`, the convolution `nn.Conv1d`.
    Every layer first runs on every length (a warm-up: thread pools, kernel choice and allocations happen then),
    so the first size timed pays no one-off cost; then each runs `repeats` timed passes and one counted for memory.
    `layers` (name -> function of a ``(1, n, d_model)`` input) measures others instead. A request whose tensors
    would exceed MAX_MEASURE_BYTES (a server every session shares) is refused with the limit named.
    """
    if not lengths:
        raise InputError("pick at least one sequence length")
    lengths = sorted({whole_number("a sequence length", n, 1, MAX_MEASURE_LENGTH) for n in lengths})
    d_model = whole_number("d", d_model, 2, 2048)
    heads = whole_number("heads", heads, 1, d_model)
    if d_model % heads:
        raise InputError(f"d = {d_model} is not divisible by {heads} heads")
    kernel = whole_number("the kernel width k", kernel, 1, 31)
    repeats = whole_number("repeats", repeats, 1, 20)
    needed = measure_memory_bytes(lengths[-1], d_model, heads, kernel)
    if needed > MAX_MEASURE_BYTES:
        raise InputError(f"n = {lengths[-1]} with d = {d_model} and {heads} heads needs about {needed / 2**20:,.0f} MB "
                         f"(the {heads} × n × n attention weights above all); the limit per request is "
                         f"{MAX_MEASURE_BYTES // 2**20} MB on this shared server: pick fewer heads or shorter lengths")
    generator = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):  # the layers' random init must not move the process's RNG
        torch.manual_seed(0)
        layers = compared_layers(d_model, heads, kernel) if layers is None else dict(layers)
    inputs = {n: torch.randn(1, n, d_model, generator=generator) for n in lengths}
    rows = []
    total, done = len(lengths) * len(layers), 0
    with torch.inference_mode():
        for x in inputs.values():  # warm-up
            for run in layers.values():
                run(x)
        for n, x in inputs.items():
            for name, run in layers.items():
                times = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    run(x)
                    times.append(time.perf_counter() - started)
                tracker = PeakTensorMemory()
                with tracker:
                    result = run(x)
                del result
                rows.append({"layer": name, "n": n, "ms": 1000 * float(np.median(times)),
                             "peak_mib": tracker.peak / 2**20})
                done += 1
                if progress is not None:
                    progress(done / total)
    return pd.DataFrame(rows)
