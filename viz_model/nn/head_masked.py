"""A network with some attention heads switched off, as a search reads it: `HeadMaskedNetwork` hands a `HeadMask`
to every encode and decode call of the shared network, which itself never changes (see `viz_model.nn.model.HeadMask`).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ..config import ModelConfig
from .model import DecoderOutput, EncoderOutput, HeadMask, LayerCache, Transformer
from .quantize import rows_interact


class HeadMaskedNetwork:
    """The network as `viz_model.search.decoding.beam_search` reads it, with `head_mask` given to every encode and
    decode call.

    :ivar network: the wrapped network
    :ivar head_mask: the multipliers every call gets
    """

    def __init__(self, network: Transformer, head_mask: HeadMask) -> None:
        self.network = network
        self.head_mask = head_mask

    @property
    def config(self) -> ModelConfig:
        """The wrapped network's config."""
        return self.network.config

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """The wrapped network's parameters."""
        return self.network.parameters()

    def encode(self, src: torch.Tensor, need_weights: bool = False, positions: bool = True) -> EncoderOutput:
        """`Transformer.encode` with the head mask."""
        return self.network.encode(src, need_weights, self.head_mask, positions)

    def decode(self, tgt: torch.Tensor, encoded: EncoderOutput, need_weights: bool = False,
               cache: list[LayerCache] | None = None, offset: int = 0, tgt_mask: torch.Tensor | None = None,
               positions: bool = True) -> DecoderOutput:
        """`Transformer.decode` with the head mask."""
        return self.network.decode(tgt, encoded, need_weights, cache, offset, tgt_mask, self.head_mask, positions)

    def logits(self, hidden: torch.Tensor, mask_never_emitted: bool = True) -> torch.Tensor:
        """`Transformer.logits` (heads play no part there)."""
        return self.network.logits(hidden, mask_never_emitted)

    @property
    def shared_activation_scale(self) -> bool:
        """Whether the wrapped network is an int8 search network (see `viz_model.nn.quantize.rows_interact`)."""
        return rows_interact(self.network)
