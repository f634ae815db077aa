"""Rotary position embedding (RoPE; Su et al. 2021, RoFormer; Llama, Qwen, Mistral, Gemma): queries and keys are
rotated pairwise by an angle proportional to their position, ``p * theta_i`` with ``theta_i = base^(-2i/d_head)``,
so that ``q_p . k_j`` depends on the offset ``p - j`` only, not on where the pair sits.

The pairing is Llama's (`transformers`' ``rotate_half``): dimension i turns with dimension i + d_head/2 (the two
halves of the head), not the adjacent pairs of the paper; both rotate the same angles, in another order of
dimensions. Nothing is added to the input and nothing is learned.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .score_position import ScorePosition

MAX_BASE = 1e9


def rope_frequencies(d_head: int, base: float = 10000.0) -> Tensor:
    """``theta_i = base^(-2i/d_head)``, i = 0 .. d_head/2 - 1, in float32 as Llama computes them."""
    if d_head % 2:
        raise ValueError(f"rotary embeddings need an even head width, got d_head = {d_head}")
    return 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.int64).float() / d_head))


def rope_angles(positions: Tensor, d_head: int, base: float = 10000.0, frequencies: Tensor | None = None,
                attention_factor: float = 1.0) -> tuple[Tensor, Tensor]:
    """cos and sin of ``p * theta_i`` for positions ``(..., len)``: each ``(..., len, d_head)``, the angles of the
    first half repeated for the second (dimension i and i + d_head/2 turn together); `frequencies`: the ``theta_i``
    in place of `base`'s (a scaled RoPE's); both times `attention_factor` (YaRN's, as transformers applies it)."""
    frequencies = (rope_frequencies(d_head, base) if frequencies is None else frequencies).to(positions.device)
    angles = positions[..., None].float() * frequencies
    both = torch.cat((angles, angles), dim=-1)
    if attention_factor == 1.0:
        return both.cos(), both.sin()
    return both.cos() * attention_factor, both.sin() * attention_factor


def rotate_half(x: Tensor) -> Tensor:
    """``(x1, x2) -> (-x2, x1)`` over the two halves of the last dimension: a quarter turn of every pair."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """`x` ``(batch, heads, len, d_head)`` rotated by the angles of ``(batch or 1, len, width)`` cos and sin: its first
    `width` dimensions, the rest unturned where the rotation is narrower than the head (partial rotary: GPT-NeoX,
    Phi)."""
    cos, sin = cos[:, None].to(x.dtype), sin[:, None].to(x.dtype)
    width = cos.shape[-1]
    if width == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    turned = x[..., :width]
    return torch.cat((turned * cos + rotate_half(turned) * sin, x[..., width:]), dim=-1)


class Rotary:
    """RoPE for one stack's self-attention: no parameters, the frequencies from `base` (or given: a scaled RoPE's),
    cos and sin times `attention_factor` (YaRN's; 1 otherwise); `d_head`: the dimensions it turns (the first of each
    head: fewer than the head's under partial rotary)."""

    adds_bias = False  # a rotation of queries and keys: its effect on the scores depends on the tokens
    grows_with_length = False  # the same frequencies at every length

    def __init__(self, d_head: int, base: float = 10000.0, frequencies: Tensor | None = None,
                 attention_factor: float = 1.0) -> None:
        self.d_head, self.base, self.frequencies, self.attention_factor = d_head, base, frequencies, attention_factor

    def frequencies_for(self, queries: Tensor) -> Tensor | None:
        """The ``theta_i`` a pass with new tokens at `queries` turns by: the same at every length (None: `base`'s)."""
        return self.frequencies

    def score_position(self, queries: Tensor, keys: Tensor, need_weights: bool) -> ScorePosition:
        """The rotation of the new tokens at positions `queries` ``(batch, len)``; with `need_weights` also every
        key's (at `keys`), so a record can give the scores without the rotation."""
        frequencies = self.frequencies_for(queries)
        rotation = rope_angles(queries, self.d_head, self.base, frequencies, self.attention_factor)
        key_rotation = rope_angles(keys, self.d_head, self.base, frequencies, self.attention_factor) \
            if need_weights else None
        return ScorePosition(queries, rotation=rotation, key_rotation=key_rotation, key_positions=keys)
