"""A mixture of experts in place of the feed-forward network (Mixtral): a router scores every expert for each token,
the token goes through its `top_k` best, and their outputs are added, weighted by the router's probabilities of the
chosen experts renormalised to sum to one (transformers' ``MixtralSparseMoeBlock``). `ExpertRouting` is what a call
routed, returned with its output (`routed`), never kept on the module."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .linear import Linear
from .model import FeedForward


@dataclass
class ExpertRouting:
    """Where one layer's mixture sent each token of a call.

    :ivar experts: ``(batch, len, top_k)`` int64 each token's chosen experts, best first
    :ivar weights: ``(batch, len, top_k)`` float32 the router's weight of each (a row sums to one)
    """

    experts: Tensor
    weights: Tensor


def mixed(flat: Tensor, weights: Tensor, index: Tensor, expert: Callable[[int, Tensor], Tensor]) -> Tensor:
    """The tokens ``(n, d_model)`` through their chosen experts (`index` ``(n, top_k)``; ``expert(e, rows)``: expert
    e's output of those rows), added with their `weights` in ascending expert order, as transformers adds them."""
    out = torch.zeros_like(flat)
    for chosen in index.unique().tolist():
        rows, slot = torch.where(index == chosen)
        part = expert(chosen, flat[rows]) * weights[rows, slot, None]
        out.index_add_(0, rows, part.to(out.dtype))
    return out


class Mixture(nn.Module, ABC):
    """What every mixture of experts shares: `routing` (each token's experts and weights), `expert` (one expert's
    output) and the forward pass they make."""

    @abstractmethod
    def routing(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """For tokens ``(n, d_model)``: the chosen experts' weights ``(n, top_k)`` and indices ``(n, top_k)``."""

    @abstractmethod
    def expert(self, index: int, x: Tensor) -> Tensor:
        """Expert `index`'s output of the tokens ``(rows, d_model)`` routed to it."""

    def routed(self, x: Tensor) -> tuple[Tensor, ExpertRouting]:
        """The output of `x` ``(batch, len, d_model)`` and where it routed each token."""
        flat = x.reshape(-1, x.shape[-1])
        weights, index = self.routing(flat)
        out = mixed(flat, weights, index, self.expert).reshape(x.shape)
        shape = (*x.shape[:-1], index.shape[-1])
        return out, ExpertRouting(index.reshape(shape), weights.float().reshape(shape))

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])
        weights, index = self.routing(flat)
        return mixed(flat, weights, index, self.expert).reshape(x.shape)


class MixtureOfExperts(Mixture):
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

    def expert(self, index: int, x: Tensor) -> Tensor:
        """Expert `index`'s gated feed-forward output."""
        return self.experts[index](x)


def routed(ffn: nn.Module, x: Tensor) -> tuple[Tensor, ExpertRouting | None]:
    """`ffn`'s output of `x` and, where it is a mixture of experts, where it routed each token (None otherwise)."""
    return ffn.routed(x) if isinstance(ffn, Mixture) else (ffn(x), None)
