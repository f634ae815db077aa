"""RoPE's frequency scalings, as transformers' ``modeling_rope_utils`` computes them: ``linear`` (every frequency
divided by the factor), ``llama3`` (Llama 3.1: long wavelengths divided by the factor, short ones kept, a smooth
ramp between), ``yarn`` (the same blend by a linear ramp over a range of pairs, and cos and sin multiplied by an
attention factor) and ``dynamic`` (NTK: the base grows with the sequence length past the trained one). Other rope
types (longrope) are refused where a config is read."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..config import ModelConfig
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
        raise ValueError(f"rope scaling {scaling!r} is not implemented here (default, linear and llama3 are)")
    low_wavelength = original_max_positions / low_freq_factor
    high_wavelength = original_max_positions / high_freq_factor
    wavelength = 2 * math.pi / frequencies
    scaled = torch.where(wavelength > low_wavelength, frequencies / factor, frequencies)
    smooth = (original_max_positions / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
    return torch.where(medium, smoothed, scaled)


def yarn_frequencies(d_head: int, base: float, factor: float, original_max_positions: int, beta_fast: float = 32.0,
                     beta_slow: float = 1.0, truncate: bool = True) -> Tensor:
    """YaRN's ``theta_i`` (float32): the pairs that turn more than `beta_fast` times within the trained length kept,
    those that turn fewer than `beta_slow` times divided by `factor`, a linear ramp over the pairs between."""

    def correction_dim(rotations: float) -> float:
        return d_head * math.log(original_max_positions / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_head - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = torch.clamp((torch.arange(d_head // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    powers = base ** (torch.arange(0, d_head, 2).float() / d_head)
    kept = 1 - ramp
    return 1.0 / (factor * powers) * (1 - kept) + 1.0 / powers * kept


def yarn_attention_factor(factor: float, given: float | None = None, mscale: float = 0.0,
                          mscale_all_dim: float = 0.0) -> float:
    """What YaRN multiplies cos and sin by: `given`, else ``0.1 ln(factor) + 1`` (each term times `mscale` and
    `mscale_all_dim` where both are set, as their ratio: DeepSeek's); 1 for a factor of at most 1."""
    if given is not None:
        return given

    def magnitude(scale: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * scale * math.log(factor) + 1.0

    if mscale and mscale_all_dim:
        return float(magnitude(mscale) / magnitude(mscale_all_dim))
    return magnitude(1.0)


def dynamic_frequencies(d_head: int, base: float, factor: float, original_max_positions: int, length: int) -> Tensor:
    """Dynamic NTK's ``theta_i`` (float32, as transformers computes them) for a sequence of `length` tokens: past
    `original_max_positions`, the base times ``(factor * length / original - (factor - 1)) ^ (d / (d - 2))``."""
    if length <= original_max_positions:
        return rope_frequencies(d_head, base)
    grown = base * ((factor * torch.tensor(length) / original_max_positions) - (factor - 1)) ** (d_head / (d_head - 2))
    return 1.0 / (grown ** (torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head))


def rotary_dims(cfg: ModelConfig) -> int:
    """The dimensions of each head RoPE turns: the head's, or its first `rope_dims` under partial rotary."""
    return cfg.d_head if cfg.rope_dims is None else cfg.rope_dims


def config_frequencies(cfg: ModelConfig, length: int | None = None) -> Tensor:
    """The ``theta_i`` (float32) of `cfg`'s RoPE, scaled as it says; a dynamic scaling's at `length` tokens (at the
    trained length, i.e. unscaled, where None)."""
    if cfg.rope_scaling == "yarn":
        return yarn_frequencies(rotary_dims(cfg), cfg.rope_base, cfg.rope_factor, cfg.rope_original_max_positions,
                                cfg.rope_beta_fast, cfg.rope_beta_slow, cfg.rope_truncate)
    if cfg.rope_scaling == "dynamic":
        return dynamic_frequencies(rotary_dims(cfg), cfg.rope_base, cfg.rope_factor, cfg.rope_original_max_positions,
                                   cfg.rope_original_max_positions if length is None else length)
    return scaled_frequencies(rotary_dims(cfg), cfg.rope_base, cfg.rope_scaling, cfg.rope_factor,
                              cfg.rope_low_freq_factor, cfg.rope_high_freq_factor, cfg.rope_original_max_positions)


def config_attention_factor(cfg: ModelConfig) -> float:
    """What `cfg`'s RoPE multiplies cos and sin by (YaRN's attention factor; 1 for every other scaling)."""
    if cfg.rope_scaling != "yarn":
        return 1.0
    return yarn_attention_factor(cfg.rope_factor, cfg.rope_attention_factor, cfg.rope_mscale, cfg.rope_mscale_all_dim)
