"""``y = x W^T + b`` with a faster CPU kernel at inference.

For the few rows a translation multiplies at once (a sentence's tokens, a step's beams), PyTorch's default CPU
matrix product (MKL) reads the weights at a fraction of the memory bandwidth: the 58k-row output projection of an
opus-mt model takes ~40 ms for 22 rows. oneDNN's linear kernel, which PyTorch ships, takes about half as long on the
same weights (`benchmarks/bench_hf.py`). It is used only where no gradient is needed (float32 on the CPU, autograd
off or not asked for); training and gradient attributions keep ``F.linear``. Both compute the same product; the
sums are taken in another order, so results differ by float32 rounding (~1e-6 relative).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch build has oneDNN's linear kernel: a private op, so checked once, with a call (at first
    use, not at import)."""
    try:
        out = torch.ops.mkldnn._linear_pointwise(torch.ones(2, 3), torch.ones(4, 3), torch.zeros(4), "none", [], "")
        return torch.backends.mkldnn.is_available() and bool((out == 3).all())
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def uses_onednn(x: Tensor, weight: Tensor) -> bool:
    """True where `linear` takes oneDNN's kernel: float32 CPU tensors and no gradient to track."""
    return (x.dtype == torch.float32 and weight.dtype == torch.float32 and x.device.type == "cpu"
            and weight.device.type == "cpu"
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)) and onednn_available())


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``, through oneDNN where `uses_onednn`."""
    if uses_onednn(x, weight) and (bias is None or bias.dtype == torch.float32):
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, same state-dict keys) computed by `linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
