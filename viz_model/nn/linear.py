"""``y = x W^T + b`` with a faster CPU kernel at inference.

For the few rows a translation multiplies at once (a sentence's tokens, a step's beams), PyTorch's default CPU
matrix product (MKL) reads the weights at a fraction of the memory bandwidth: on this project's 2-core VM the 58k-row
output projection of an opus-mt model took ~40 ms for 22 rows, oneDNN's linear kernel, which PyTorch ships, about
half as long on the same weights. It is used only where nothing needs a gradient (float32 on the CPU, autograd off
or no tensor of the product requiring one, no autocast); training, gradient attributions and autocast keep
``F.linear``. Both compute the same product; the sums are taken in another order, so results differ by float32
rounding (~1e-6 relative). Forward-mode AD (dual tensors) is not supported on the oneDNN path. A small weight
keeps ``F.linear`` too: oneDNN reorders an unpacked weight on every call, a fixed cost (~60-100 us on the 2-core VM
against ~3-25 us for the whole product of a 32 x 32 to 128 x 128 weight: `benchmarks/bench_linear.py`).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ONEDNN_MIN_WEIGHT = 2**15
"""The fewest weight elements for which oneDNN's kernel is used. Up to 2**16 ``F.linear`` was faster for 1, 4 and 22
rows in every measured shape, from 2**18 oneDNN mostly (`benchmarks/bench_linear.py`); 2**15 keeps every shipped
model's weights (192 x 192 the smallest) on oneDNN as before, and moves the tests' tiny models off it."""


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch build has oneDNN's linear kernel: a private op, so checked once, with a call (at first
    use, not at import)."""
    try:
        probe = [torch.ones(2, 3, device="cpu"), torch.ones(4, 3, device="cpu"), torch.zeros(4, device="cpu")]
        out = torch.ops.mkldnn._linear_pointwise(*probe, "none", [], "")
        return torch.backends.mkldnn.is_available() and bool((out == 3).all())
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def uses_onednn(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> bool:
    """True where `linear` takes oneDNN's kernel: a weight of `ONEDNN_MIN_WEIGHT` elements or more, float32 CPU
    tensors, no gradient to track, no CPU autocast."""
    tensors = (x, weight) if bias is None else (x, weight, bias)
    return (weight.numel() >= ONEDNN_MIN_WEIGHT
            and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors)
            and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
            and not torch.is_autocast_enabled("cpu") and onednn_available())


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``, through oneDNN where `uses_onednn`."""
    if uses_onednn(x, weight, bias):
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, same state-dict keys) computed by `linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
