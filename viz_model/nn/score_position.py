"""How position enters a stack's self-attention scores when it is not added to the input: the new tokens'
positions, and a rotation of queries and keys (RoPE) or a bias added to the scores (ALiBi, T5's relative bias)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class ScorePosition:
    """What one attention call needs to put position into its scores; built once per stack and call.

    :ivar positions: ``(batch, len)`` the positions of the tokens this call adds (queries and new keys)
    :ivar rotation: cos and sin ``(batch, len, d_head)`` turning the new queries and keys (RoPE), else None
    :ivar key_rotation: cos and sin of every key (RoPE, when weights are recorded: to give the scores without
        the rotation), else None
    :ivar bias: ``(batch, heads, len, keys)`` added to the scores before the softmax (ALiBi, relative), else None
    :ivar key_positions: ``(batch, keys)`` the positions of every key, cached ones first (what each layer's cache
        keeps: one tensor for all layers)
    """

    positions: Tensor
    rotation: tuple[Tensor, Tensor] | None = None
    key_rotation: tuple[Tensor, Tensor] | None = None
    bias: Tensor | None = None
    key_positions: Tensor | None = None
