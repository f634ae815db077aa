"""Dynamic NTK RoPE: the base grows with the sequence length past the trained one, recomputed for each pass from
its last position, as transformers' ``dynamic_rope_update`` does on a fresh model. Keys cached by an earlier pass
keep the rotation they were given then, so a search equals ``generate``'s step by step."""

from __future__ import annotations

from torch import Tensor

from .rope_scaling import dynamic_frequencies
from .rotary import Rotary


class DynamicRotary(Rotary):
    """RoPE whose frequencies are dynamic NTK's at the length a pass reaches (`factor`, `original_max_positions`)."""

    grows_with_length = True

    def __init__(self, d_head: int, base: float, factor: float, original_max_positions: int) -> None:
        super().__init__(d_head, base)
        self.factor, self.original_max_positions = factor, original_max_positions

    def frequencies_for(self, queries: Tensor) -> Tensor:
        """Dynamic NTK's ``theta_i`` at the pass's length: its last new position + 1."""
        length = int(queries.max()) + 1 if queries.numel() else 0
        return dynamic_frequencies(self.d_head, self.base, self.factor, self.original_max_positions, length)
