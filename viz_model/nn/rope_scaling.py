"""RoPE's frequency scalings, as transformers' ``modeling_rope_utils`` computes them: ``linear`` (every frequency
divided by the factor) and ``llama3`` (Llama 3.1: long wavelengths divided by the factor, short ones kept, a smooth
ramp between). Other rope types (dynamic, yarn, longrope) are refused where a config is read."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .rotary import rope_frequencies


def scaled_frequencies(d_head: int, base: float, scaling: str = "default", factor: float = 1.0,
                       low_freq_factor: float = 1.0, high_freq_factor: float = 4.0,
                       original_max_positions: int = 8192) -> Tensor:
    """RoPE's ``theta_i`` (float32) under `scaling` "default", "linear" or "llama3"."""
    frequencies = rope_frequencies(d_head, base)
    if scaling == "default":
        return frequencies
    if scaling == "linear":
        return frequencies / factor
    if scaling != "llama3":
        raise ValueError(f"rope scaling {scaling!r} is not implemented (default, linear and llama3 are)")
    low_wavelength = original_max_positions / low_freq_factor
    high_wavelength = original_max_positions / high_freq_factor
    wavelength = 2 * math.pi / frequencies
    scaled = torch.where(wavelength > low_wavelength, frequencies / factor, frequencies)
    smooth = (original_max_positions / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
    return torch.where(medium, smoothed, scaled)
