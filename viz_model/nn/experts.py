"""A mixture of experts in place of the feed-forward network (Mixtral): a router scores every expert for each token,
the token goes through its `top_k` best, and their outputs are added, weighted by the router's probabilities of the
chosen experts renormalised to sum to one (transformers' ``MixtralSparseMoeBlock``)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .linear import Linear
from .model import FeedForward


class MixtureOfExperts(nn.Module):
    """Each token's `top_k` gated feed-forward experts of `experts`, chosen and weighted by the router `gate`.

    :ivar gate: the router, one score per expert (no bias)
    :ivar experts: the experts, each a gated feed-forward network ``(act(x W1) * x W3) W2`` without biases
    :ivar top_k: the experts each token goes through
    """

    def __init__(self, d_model: int, d_ff: int, experts: int, top_k: int, activation: str = "silu") -> None:
        super().__init__()
        self.gate = Linear(d_model, experts, bias=False)
        self.experts = nn.ModuleList(FeedForward(d_model, d_ff, activation, gated=True, bias=False)
                                     for _ in range(experts))
        self.top_k = top_k

    def routing(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """For tokens ``(n, d_model)``: the chosen experts' weights ``(n, top_k)`` (float32, each row summing to one)
        and their indices ``(n, top_k)``, best first: the softmax over all experts in float32, its top k
        renormalised."""
        probabilities = torch.softmax(self.gate(x).float(), dim=-1)
        weights, index = probabilities.topk(self.top_k, dim=-1)
        return weights / weights.sum(dim=-1, keepdim=True), index

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, index = self.routing(flat)
        out = torch.zeros_like(flat)
        for expert in index.unique().tolist():  # ascending, as transformers adds them
            rows, slot = torch.where(index == expert)
            part = self.experts[expert](flat[rows]) * weights[rows, slot, None]
            out.index_add_(0, rows, part.to(out.dtype))
        return out.reshape(x.shape)
