"""gpt-oss's mixture of experts (transformers' ``GptOssMLP``): a router with a bias whose top k logits are softmaxed
into the chosen experts' weights, and experts with biases whose gate and up projections are interleaved in one matrix,
clamped at a limit, through a GLU of their own: ``(clamp(up) + 1) * g * sigmoid(alpha * g)`` with g the clamped
gate."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .experts import Mixture
from .linear import Linear


class ClampedExperts(Mixture):
    """Each token's `top_k` of `experts` experts, weighted by the softmax of the router's top k logits.

    :ivar router: one logit per expert, with a bias
    :ivar gate_up_proj: ``(experts, d_model, 2 d_ff)`` each expert's gate and up projections, interleaved (even
        columns the gate, odd ones up), as transformers stores them
    :ivar gate_up_proj_bias: ``(experts, 2 d_ff)`` their biases
    :ivar down_proj: ``(experts, d_ff, d_model)`` each expert's output projection
    :ivar down_proj_bias: ``(experts, d_model)`` its bias
    :ivar top_k: the experts each token goes through
    :ivar limit: the clamp of the gate (above) and of up (both sides)
    :ivar alpha: the GLU's ``sigmoid(alpha * g)``
    """

    def __init__(self, d_model: int, d_ff: int, experts: int, top_k: int, limit: float, alpha: float) -> None:
        super().__init__()
        self.router = Linear(d_model, experts, bias=True)
        self.gate_up_proj = nn.Parameter(torch.empty(experts, d_model, 2 * d_ff).normal_(std=0.02))
        self.gate_up_proj_bias = nn.Parameter(torch.zeros(experts, 2 * d_ff))
        self.down_proj = nn.Parameter(torch.empty(experts, d_ff, d_model).normal_(std=0.02))
        self.down_proj_bias = nn.Parameter(torch.zeros(experts, d_model))
        self.top_k, self.limit, self.alpha = top_k, limit, alpha

    def routing(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """For tokens ``(n, d_model)``: the chosen experts' weights ``(n, top_k)`` (the softmax of their logits, in
        the logits' dtype) and their indices ``(n, top_k)``, best first."""
        top, index = self.router(x).topk(self.top_k, dim=-1)
        return torch.softmax(top, dim=-1), index

    def expert(self, index: int, x: Tensor) -> Tensor:
        """Expert `index`'s output: its interleaved gate and up, clamped, through its GLU, projected down."""
        gate_up = x @ self.gate_up_proj[index] + self.gate_up_proj_bias[index]
        gate = gate_up[..., ::2].clamp(max=self.limit)
        up = gate_up[..., 1::2].clamp(min=-self.limit, max=self.limit)
        return ((up + 1) * gate * torch.sigmoid(gate * self.alpha)) @ self.down_proj[index] + self.down_proj_bias[index]
