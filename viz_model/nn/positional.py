"""Positional encodings: the paper's fixed sinusoids and a learned alternative (paper Table 3, row E).

``PE(pos, 2i) = sin(pos / 10000^(2i/d_model))``, ``PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))``:
sin and cos interleaved, wavelengths a geometric progression from 2*pi to 10000*2*pi. Marian and fairseq models
use the same values in another order (``layout="halves"``): all the sines in the first half of the dimensions, the
cosines in the second. fairseq (M2M100, NLLB) also spaces the frequencies slightly differently
(``frequencies="fairseq"``: ``exp(-i ln(10000) / (d_model/2 - 1))``, so the last pair's wavelength is exactly
10000*2*pi) and starts counting positions at 2 (a model's ``position_offset``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn


def inverse_frequencies(d_model: int, base: float = 10000.0, frequencies: str = "paper") -> Tensor:
    """The angular frequency of each sin/cos pair, i = 0 .. d_model/2 - 1: ``base^(-2i/d_model)`` (the paper) or
    ``base^(-i/(d_model/2 - 1))`` (fairseq)."""
    if frequencies not in ("paper", "fairseq"):
        raise ValueError(f"sinusoid frequencies must be paper or fairseq, got {frequencies!r}")
    pairs = torch.arange(d_model // 2, dtype=torch.float64)
    denominator = d_model / 2 if frequencies == "paper" else max(d_model // 2 - 1, 1)
    return torch.exp(-math.log(base) * pairs / denominator)


def sinusoidal_table(length: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float32,
                     layout: str = "interleaved", frequencies: str = "paper") -> Tensor:
    """The ``(length, d_model)`` sinusoid matrix: even columns sin, odd columns cos (``interleaved``), or the sines
    of every frequency first and their cosines after (``halves``); `frequencies`: see `inverse_frequencies`.

    Computed in float64 and returned as `dtype` (float32, what the model adds; float64 for exact checks).
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal encodings need an even d_model, got {d_model}")
    if layout not in ("interleaved", "halves"):
        raise ValueError(f"sinusoid layout must be interleaved or halves, got {layout!r}")
    position = torch.arange(length, dtype=torch.float64)[:, None]
    inv_freq = inverse_frequencies(d_model, base, frequencies)
    sin, cos = torch.sin(position * inv_freq), torch.cos(position * inv_freq)
    if layout == "halves":
        return torch.cat([sin, cos], dim=1).to(dtype)
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = sin, cos
    return table.to(dtype)


def wave(dim: int, d_model: int, layout: str = "interleaved") -> str:
    """"sin" or "cos": which function dimension `dim` of the table holds in that layout."""
    if layout == "halves":
        return "sin" if dim < d_model // 2 else "cos"
    return "sin" if dim % 2 == 0 else "cos"


def dimension_axis(layout: str = "interleaved") -> str:
    """The title of a PE table's dimension axis: where the sines and the cosines are in that layout."""
    return "dimension (first half sin, second half cos)" if layout == "halves" else "dimension (even = sin, odd = cos)"


def pair_dimensions(pair: int, d_model: int, layout: str = "interleaved") -> tuple[int, int]:
    """The (sin, cos) dimensions of frequency `pair` in that layout: (2i, 2i + 1), or (i, d_model/2 + i) in halves."""
    return (pair, d_model // 2 + pair) if layout == "halves" else (2 * pair, 2 * pair + 1)


def wavelength_formula(frequencies: str = "paper") -> str:
    """The wavelength of pair i, as a formula: the paper's or fairseq's frequencies."""
    return "2π · 10000^(i / (d_model/2 − 1))" if frequencies == "fairseq" else "2π · 10000^(2i / d_model)"


def wavelengths(d_model: int, base: float = 10000.0, frequencies: str = "paper") -> Tensor:
    """Wavelength of each sin/cos pair: ``2*pi * base^(2i/d_model)``, i = 0 .. d_model/2 - 1 (or fairseq's)."""
    return 2 * math.pi / inverse_frequencies(d_model, base, frequencies)


def shift_matrix(k: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The block-diagonal rotation M_k with ``PE(pos + k) = M_k @ PE(pos)`` for every pos."""
    inv_freq = 2 * math.pi / wavelengths(d_model, base)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, w in enumerate(inv_freq.tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = c, s
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -s, c
    return m


class SinusoidalPositions(nn.Module):
    """Fixed sinusoids, kept as a non-persistent buffer (recomputed, not saved in the weights)."""

    def __init__(self, max_positions: int, d_model: int, layout: str = "interleaved", frequencies: str = "paper",
                 first: int = 0) -> None:
        """Positions 0 .. max_positions-1 get the table's rows `first` .. (fairseq's tables start at row 2)."""
        super().__init__()
        self.max_positions, self.layout, self.frequencies, self.first = max_positions, layout, frequencies, first
        self.register_buffer("table", torch.empty(max_positions, d_model), persistent=False)
        if not self.table.is_meta:  # on the meta device (shape planning) nothing is computed: see normal_embedding
            self.fill_table()

    def fill_table(self) -> None:
        """Compute the sinusoids into the buffer (also for a model built on the meta device, once it has storage)."""
        table = sinusoidal_table(self.max_positions + self.first, self.table.shape[1], layout=self.layout,
                                 frequencies=self.frequencies)[self.first:]
        with torch.no_grad():
            self.table.copy_(table)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """Encodings of positions ``offset .. offset+length-1``: ``(length, d_model)``."""
        check_positions(length, offset, self.max_positions)
        return self.table[offset:offset + length]


def normal_embedding(num: int, dim: int, std: float, padding_idx: int | None = None) -> nn.Embedding:
    """An ``nn.Embedding`` drawn from N(0, std^2). On the meta device (shape planning before a load) nothing is
    drawn: ``normal_`` on a meta tensor makes PyTorch import its decompositions, ~75 MB of resident memory."""
    weight = torch.empty(num, dim)
    if not weight.is_meta:
        nn.init.normal_(weight, std=std)
    return nn.Embedding(num, dim, padding_idx=padding_idx, _weight=weight)


class LearnedPositions(nn.Module):
    """One learned vector per position; position p reads row p + `first` (BART's tables start at row 2)."""

    def __init__(self, max_positions: int, d_model: int, first: int = 0) -> None:
        super().__init__()
        self.max_positions, self.first = max_positions, first
        self.embedding = normal_embedding(max_positions + first, d_model, d_model ** -0.5)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        check_positions(length, offset, self.max_positions)
        return self.embedding.weight[self.first + offset:self.first + offset + length]


def check_positions(length: int, offset: int, max_positions: int) -> None:
    if offset + length > max_positions:
        raise ValueError(f"sequence of {offset + length} positions exceeds the model's maximum of "
                         f"{max_positions} positions (max_positions)")


@dataclass
class ShiftCheck:
    """M_k PE(p) against PE(p + k) for every p (float32 tables, as the model adds them, and float64)."""

    k: int
    matrix: np.ndarray  # (d_model, d_model) float64 block rotation
    positions: np.ndarray  # p
    error32: np.ndarray  # max_i |M_k PE(p) − PE(p + k)|_i per p, float32 tables
    error64: np.ndarray
