"""Which torch device a model runs on: "auto", "cpu", "cuda" or "cuda:N", checked, and named for people."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

DEVICE_ENV = "VIZ_MODEL_DEVICE"  # the explorer's device: auto (the default), cpu, cuda or cuda:N


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """"auto" = the GPU when torch sees one, else the CPU."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N; got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} asked for, but torch sees {torch.cuda.device_count()} CUDA GPU(s)")
    return torch.device(device)


def device_from_env() -> str:
    """The device the explorer loads models on: ``VIZ_MODEL_DEVICE`` (``viz-model app --device`` sets it), checked
    with `resolve_device`; ``auto`` when unset."""
    value = os.environ.get(DEVICE_ENV, "").strip() or "auto"
    try:
        resolve_device(value)
    except ValueError as err:
        raise ValueError(f"{DEVICE_ENV}={value}: {err}") from None
    return value


def device_label(device: torch.device) -> str:
    """'CPU' or the GPU's name."""
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    return "CPU"


def give_back_memory() -> bool:
    """Hand memory freed by let-go tensors back to the system: glibc's ``malloc_trim(0)`` (it otherwise keeps freed
    heap for reuse, so a process's resident set stays at its peak) and the CUDA caching allocator's free blocks.
    True where glibc trimmed; False on a C library without it (nothing to do there)."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False


STEADY_MMAP_THRESHOLD = 1 << 20  # bytes: blocks above it are mapped and unmapped whole (benchmarks/bench_soak.py)


def steady_allocator(threshold: int = STEADY_MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold (``mallopt(M_MMAP_THRESHOLD)``, as ``MALLOC_MMAP_THRESHOLD_`` would): every block
    above `threshold` goes back to the system when freed, so a server's resident set stays flat over many long traces
    instead of drifting with glibc's sliding threshold. True where glibc took it; False elsewhere (nothing to do)."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, int(threshold)))  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


@contextmanager
def threads(count: int) -> Iterator[None]:
    """The calling thread's torch operations on `count` threads for the block (PyTorch's thread count is per thread
    in its OpenMP build, so other threads keep theirs)."""
    before = torch.get_num_threads()
    if count == before:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def one_thread() -> Iterator[None]:
    """The calling thread's torch operations on one core for the block: a tiny model gains nothing from a second
    core, and on a 2-core CPU shared with a browser two threads trained a few steps a second where one trains tens."""
    with threads(1):
        yield
