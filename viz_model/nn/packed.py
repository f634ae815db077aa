"""A full-precision copy of a network for inference on the CPU, its weights packed once in oneDNN's blocked layout.

`viz_model.nn.linear` already multiplies through oneDNN's kernel, but with weights in PyTorch's plain layout, which
the kernel reorders on every call; a decoding step makes a few dozen such calls for a handful of rows. Packed once,
the same products skip that work, and self-attention's Q, K, V and a gated feed-forward's two input matrices are
fused as well (`viz_model.nn.fused`); `benchmarks/bench_families.py` times the whole trace. The numbers are the
network's, bit for bit (a single row, where the packed kernel rounds otherwise, is multiplied as the network does),
so a search on the copy finds what one on the network finds, and a trace may record its maps from it.

The copy holds the encoder's, the decoder's and the vocabulary projection's matrices a second time (every other
tensor is shared), so it is built only up to `PACKED_MAX_BYTES` of them, and `TranslationModel` asks for it only
where a decoding step's weights fit the CPU's caches: a larger model's full-precision search is drafted in int8 and
verified in one pass (`viz_model.search.next_token.draft_pays`), where packing gained nothing at opus-mt's size and
cost its matrices' memory (`benchmarks/bench_peers.py`). Like the int8 copy (`viz_model.nn.quantize`) it is a
frozen snapshot for inference: never to be trained, moved or changed. Where PyTorch lacks the kernels,
`packed_search_network` returns None.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .fused import Parts, search_copy, stacked
from .linear import ONEDNN_MIN_WEIGHT, linear, onednn_available
from .model import Transformer

ROWS_HINT = 4
"""The rows oneDNN packs a weight for (a beam of 4); any number of rows may be multiplied."""

PACKED_MAX_BYTES = 384 * 2**20
"""The most memory a packed copy may add (its matrices, float32); a safety bound beside `draft_pays`, which already
keeps models of opus-mt's size (281 MiB of matrices) on the network itself."""


class PackedLinear(nn.Module):
    """``y = x W^T + b`` for one or more of the network's linear layers side by side (`Parts`), W packed for
    oneDNN's kernel and called directly (no module hooks). A single row, where the packed kernel rounds otherwise,
    and any row where a part is below `ONEDNN_MIN_WEIGHT` (the network multiplies it by ``F.linear``), is multiplied
    as the network multiplies it (`viz_model.nn.linear`, with the network's own tensors, not copies): every product
    is the network's, bit for bit."""

    def __init__(self, layers: Parts) -> None:
        super().__init__()
        weight, bias = stacked(layers)
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.layers = tuple((w.detach(), None if b is None else b.detach()) for w, b in layers)
        self.bias = None if bias is None else bias.detach()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), ROWS_HINT)
        self.plain = any(w.numel() < ONEDNN_MIN_WEIGHT for w, _ in self.layers)  # the network's F.linear

    def forward(self, x: Tensor) -> Tensor:
        if self.plain or x.numel() == x.shape[-1]:  # as the network multiplies: F.linear, or one row
            outs = [linear(x, w, b) for w, b in self.layers]
            return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    __call__ = forward  # ~25 calls per decoding step: skip nn.Module's hook machinery

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed for oneDNN"


def packed_bytes(network: Transformer) -> int:
    """The memory a packed copy of `network` would add: its layers' matrices and the vocabulary projection, float32."""
    layers = (network.encoder_layers, network.decoder_layers)
    matrices = sum(m.weight.numel() for stack in layers for m in stack.modules() if isinstance(m, nn.Linear))
    projection = network.tgt_embedding if network.output_projection is None else network.output_projection
    return 4 * (matrices + projection.weight.numel())


def _projection(weight: Tensor) -> PackedLinear:
    return PackedLinear(((weight, None),))


def packed_search_network(network: Transformer) -> Transformer | None:
    """A copy of `network` whose encoder, decoder and vocabulary projection are packed for oneDNN; None where it
    would not run or not be worth its memory: weights other than float32 on the CPU, a network in training mode, a
    PyTorch without oneDNN's linear kernels, or more than `PACKED_MAX_BYTES` of matrices."""
    first = next(network.parameters())
    if first.device.type != "cpu" or first.dtype != torch.float32 or network.training or not onednn_available() \
            or packed_bytes(network) > PACKED_MAX_BYTES:
        return None
    try:
        with torch.no_grad():
            return search_copy(network, PackedLinear, _projection, encoder=True)
    except (AttributeError, RuntimeError, NotImplementedError):  # a build whose oneDNN cannot pack
        return None
