"""Tensors as NumPy arrays: the one conversion traces, records and attributions use."""

from __future__ import annotations

import numpy as np
import torch


def to_numpy(tensor: torch.Tensor, dtype: torch.dtype = torch.float32) -> np.ndarray:
    """`tensor` detached and on the CPU as a NumPy array: floating point as `dtype` (float32; attributions take
    float64), integers and booleans as they are."""
    tensor = tensor.detach()
    return (tensor.to(dtype) if tensor.is_floating_point() else tensor).cpu().numpy()
