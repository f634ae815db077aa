"""Where and how a run executes: the device and the precision (bf16 autocast where the hardware multiplies bf16
natively); one process or DDP under torchrun: `viz_model.data.shard.setup_distributed`."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

from ..config import ConfigError, TrainConfig


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX512-BF16 or AMX); elsewhere bf16 is emulated and slow."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # a torch without these probes: assume not
        return False


def native_bf16(device: torch.device) -> bool:
    """Whether `device` runs bf16 matmuls natively: CUDA, or a CPU with AVX512-BF16 / AMX."""
    return device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16())


def bf16_autocast_used(device: torch.device, cfg: TrainConfig) -> bool:
    """`bf16 = true` trains under bf16 autocast on CUDA and on CPUs with native bf16; fp32 elsewhere."""
    return cfg.bf16 and native_bf16(device)


def autocast_for(device: torch.device, bf16: bool) -> Any:
    """bf16 autocast on `device` when `bf16` (weights, optimizer and the loss's log-softmax stay fp32), else none."""
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' asked for, but torch sees no CUDA GPU")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
