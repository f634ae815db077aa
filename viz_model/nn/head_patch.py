"""Activation patching of attention heads: the heads whose outputs (before the output projection) a call takes
from another run, given to `CausalLM.forward` per call, never stored on a module."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

LayerPatch = tuple[Tensor, Tensor]
"""One layer's patch: the other run's head outputs ``(1 or batch, heads, len, d_head)`` and ``(batch, heads)`` bool,
True where a batch row's head takes them."""


@dataclass
class HeadPatch:
    """Per layer, another run's head outputs, and per batch row the heads that take them.

    :ivar outputs: per layer ``(1 or batch, heads, len, d_head)``: the other run's per-head outputs
    :ivar chosen: ``(batch, layers, heads)`` bool: True where the row's head takes the other run's output
    :ivar start: the first layer run: no row patches a head below it, so the rows start from `stream`
    :ivar stream: ``(1 or batch, len, d_model)`` the unpatched run's residual stream entering layer `start` (None
        where `start` is 0: the embeddings)
    """

    outputs: list[Tensor]
    chosen: Tensor
    start: int = 0
    stream: Tensor | None = None

    def __post_init__(self) -> None:
        if (self.start > 0) != (self.stream is not None) or bool(self.chosen[:, :self.start].any()):
            raise ValueError(f"a patch starting at layer {self.start} needs the residual stream entering it and "
                             "no head patched below it")

    def layer(self, index: int) -> LayerPatch | None:
        """Layer `index`'s patch; None where no row patches a head of it."""
        chosen = self.chosen[:, index]
        return (self.outputs[index], chosen) if bool(chosen.any()) else None


def swapped(out: Tensor, patch: LayerPatch | None) -> Tensor:
    """`out` ``(batch, heads, len, d_head)`` with each row's chosen heads taken from the other run (`patch`)."""
    if patch is None:
        return out
    source, chosen = patch
    if source.shape[1:] != out.shape[1:]:
        raise ValueError(f"patched head outputs {tuple(source.shape)} do not match this run's {tuple(out.shape)}")
    return torch.where(chosen.to(out.device)[:, :, None, None], source.to(out.dtype), out)
