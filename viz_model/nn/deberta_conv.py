"""DeBERTa-v2's convolution (conv_kernel_size > 0, as in deberta-v2-xlarge): after the first layer, a 1-D convolution
over the embeddings (the first layer's input), activated, is added to that layer's output, and the sum normed."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..config import ModelConfig
from .model import ACTIVATION_FUNCTIONS
from .norms import make_norm, normed


class EmbeddingConvolution(nn.Module):
    """``LayerNorm(layer_0(x) + act(conv(x)))`` over the sequence, x the embeddings (transformers' ``ConvLayer``).

    :ivar conv: the convolution over the positions, d_model channels in and out, padded to keep the length
    :ivar norm: the norm of the sum
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        size = cfg.conv_kernel_size
        self.conv = nn.Conv1d(cfg.d_model, cfg.d_model, size, padding=(size - 1) // 2, groups=cfg.conv_groups)
        self.norm = make_norm(cfg.d_model, cfg.normalization, cfg.norm_eps)
        self.activation = torch.tanh if cfg.conv_activation == "tanh" else ACTIVATION_FUNCTIONS[cfg.conv_activation]

    def forward(self, embedded: Tensor, layer_output: Tensor, mask: Tensor | None = None) -> Tensor:
        """The first layer's output with the convolution of `embedded` ``(batch, len, d_model)`` added, normed."""
        if mask is not None:
            raise ValueError("DeBERTa's convolution reads whole sequences: a padding mask is not implemented with it")
        out = self.conv(embedded.transpose(1, 2)).transpose(1, 2)
        return normed(self.norm, layer_output + self.activation(out))
