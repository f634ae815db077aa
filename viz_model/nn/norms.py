"""The norms a model's sub-layers use: PyTorch's LayerNorm, or T5's RMS norm (no mean subtracted, no bias)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension, the mean of squares in float32, as
    transformers' ``T5LayerNorm`` computes it.

    :ivar weight: the gain of each dimension
    :ivar eps: added to the mean of squares
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        weight = self.weight
        if x.dtype == weight.dtype == torch.float32 and x.device.type != "cpu":  # one fused kernel on a GPU
            return torch.rms_norm(x, weight.shape, weight, self.eps)
        # T5LayerNorm's operations (on the CPU fewer kernels than torch.rms_norm's, which copies its input)
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True).add_(self.eps)
        x = x * torch.rsqrt(variance)
        if weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(weight.dtype)
        return weight * x


class GemmaRMSNorm(RMSNorm):
    """Gemma's RMS norm: ``x / sqrt(mean(x^2) + eps) * (1 + weight)``, all in float32, then the input's dtype (the
    weight is zero-centred)."""

    def forward(self, x: Tensor) -> Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.float())).type_as(x)


def make_norm(dim: int, kind: str = "layer", eps: float = 1e-5) -> nn.LayerNorm | RMSNorm:
    """A norm of `kind` "layer" (``nn.LayerNorm``), "rms" or "gemma" over `dim` features."""
    if kind == "gemma":
        return GemmaRMSNorm(dim, eps)
    return RMSNorm(dim, eps) if kind == "rms" else nn.LayerNorm(dim, eps=eps)


def normed(norm: nn.Module, x: Tensor) -> Tensor:
    """``norm(x)`` without the module call (~18 of them per decoding step)."""
    if isinstance(norm, nn.LayerNorm):  # F.layer_norm's own body, without its dispatch checks
        return torch.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps,
                                torch.backends.cudnn.enabled)
    return norm.forward(x)
