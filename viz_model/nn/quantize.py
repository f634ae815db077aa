"""An int8 copy of a network for the beam search on the CPU (dynamic quantisation of every Linear layer).

Decoding one token for 4 beams multiplies a handful of rows by every weight matrix of the decoder and by the
vocabulary projection, so on a CPU each step waits on weights and per-call overhead, not on arithmetic. Int8
weights (one scale per output row) cut both by about 2x. Only the *search* uses the copy: the trace that the app
shows is always a teacher-forced pass of the full-precision network over the hypothesis found, so every attention
map and probability on screen is exact for the output shown.

The copy shares every other tensor with the original (encoder, embeddings, layer norms, positional encodings), so
it costs about a quarter of the memory of the decoder and the vocabulary projection. It is a frozen snapshot for
inference: thread-safe to read like the original, but never to be trained, moved or changed: its modules share
their parameter, buffer and hook dicts with the original's (so forward hooks on the original's decoder layers fire
for the search too; its int8 Linear layers run no hooks), and changing the original's weights in place leaves the
int8 copies stale. PyTorch marks its quantized-tensor API as deprecated; where a build lacks it,
`int8_search_network` returns None and the full-precision network searches instead.
"""

from __future__ import annotations

import copy
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .causal_lm import CausalLM
from .fused import Parts, search_copy, stacked, with_search_layers
from .model import Transformer
from .packed import packed_search_network

SEARCH_PRECISIONS = ("auto", "int8", "fp32")


class QuantizationUnavailable(RuntimeError):
    """This PyTorch build cannot run int8 dynamic-quantized Linear layers."""


class Int8Linear(nn.Module):
    """``y = x W^T + b`` with W stored int8 (one symmetric scale per output row) and x quantized per call: PyTorch's
    dynamic-quantized linear kernel (fbgemm / oneDNN), called directly to keep per-call overhead low."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        try:
            weight = weight.detach().float().cpu()
            # max |w| per row without a |w| copy of the matrix (119 MB for a 58k-row projection)
            scales = (torch.maximum(weight.amax(dim=1), -weight.amin(dim=1)) / 127.0).clamp_min(1e-12).double()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # PyTorch's deprecation notice for quantized tensors
                qweight = torch.quantize_per_channel(weight, scales, torch.zeros_like(scales, dtype=torch.long), 0,
                                                     torch.qint8)
                self.packed = torch.ops.quantized.linear_prepack(
                    qweight, None if bias is None else bias.detach().float().cpu())
                overload = torch.ops.quantized.linear_dynamic.default
                self.kernel = getattr(overload, "_op", overload)  # the C++ op itself: ~3 us less Python per call
                self(torch.zeros(1, weight.shape[1]))  # fails here, not mid-search, if the kernels are missing
        except (AttributeError, RuntimeError, NotImplementedError) as err:
            raise QuantizationUnavailable(f"int8 Linear layers are not available in this PyTorch build: {err}"
                                          ) from err
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    reduce_range = True  # 7-bit activations: no int16 overflow in fbgemm's AVX2 kernels (benchmarks/int8_agreement.py)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel(x, self.packed, self.reduce_range)

    __call__ = forward  # called ~25 times per decoding step: skip nn.Module's hook machinery

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


class Int8RowBlocks(nn.Module):
    """An `Int8Linear` of many output rows (a vocabulary projection, with its `bias` where it has one: Phi's) built
    and run as blocks of rows: the same numbers (one scale per row, the input quantized alike in every block), but
    building it never holds more than a block's int8 copies at once (~13 MB less peak memory for a 58k-row
    projection). A 58k-row projection's two blocks run as fast as one block on two threads, where eight were slower."""

    def __init__(self, weight: torch.Tensor, rows: int = 32768, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        parts = weight.split(rows)
        biases = [None] * len(parts) if bias is None else bias.split(rows)
        self.blocks = nn.ModuleList(Int8Linear(part, b) for part, b in zip(parts, biases, strict=True))
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([block(x) for block in self.blocks], dim=-1)

    __call__ = forward


def _int8(layers: Parts) -> Int8Linear:
    return Int8Linear(*stacked(layers))


def int8_search_network(network: Transformer, strict: bool = False) -> Transformer | None:
    """A copy of `network` (on the CPU, in eval mode) for beam search whose decoder Linear layers and vocabulary
    projection (tied or not) are int8 (self-attention's Q, K, V and a gated feed-forward's W1, W3 fused: see
    `viz_model.nn.fused`), or None where this PyTorch cannot run int8 Linear layers. The encoder runs once per
    sentence, so it stays full precision (shared, not copied). With `strict`, missing kernels raise
    `QuantizationUnavailable` instead."""
    clone = _quantized(network, lambda: search_copy(network, _int8, Int8RowBlocks), strict)  # encoder: fp32, shared
    if clone is not None:
        clone.shared_activation_scale = True  # see rows_interact
    return clone  # type: ignore[return-value]


def _quantized(network: nn.Module, build: Callable[[], nn.Module], strict: bool) -> Any:
    """`build()` for a CPU network in eval mode; None (with a warning) where int8 kernels are missing, unless
    `strict`."""
    if next(network.parameters()).device.type != "cpu":
        raise ValueError("int8 search runs on the CPU only")
    if network.training:
        raise ValueError("quantize a network in eval mode (dropout off)")
    try:
        return build()
    except QuantizationUnavailable as err:
        if strict:
            raise
        warnings.warn(f"{err}; searching in full precision", stacklevel=3)
        return None


def int8_causal_network(network: CausalLM, strict: bool = False) -> CausalLM | None:
    """An int8 copy of a decoder-only `network` (on the CPU, in eval mode) that drafts its greedy continuation: each
    layer's Linear layers int8 (fused as in `int8_search_network`), the output projection (tied or not) int8 in row
    blocks with its bias (Phi's); embeddings, norms and positions shared. None where int8 kernels are missing
    (`strict`: raise)."""
    def build() -> CausalLM:
        clone = copy.copy(network)
        clone._modules = dict(network._modules)
        clone.layers = with_search_layers(network.layers, _int8)  # type: ignore[assignment]
        head = network.lm_head
        clone.lm_head = Int8RowBlocks(network.embedding.weight) if head is None else \
            Int8RowBlocks(head.weight, bias=head.bias)  # type: ignore[assignment]
        return clone
    return _quantized(network, build, strict)


def rows_interact(network: object) -> bool:
    """True for an int8 search network: each call quantizes its input with one scale for all rows, so the rows
    of a batch nudge each other's results. Batched translation then decodes one sentence per batch, so that a
    sentence's translation never depends on the sentences it was batched with (its beams do share a scale)."""
    return bool(getattr(network, "shared_activation_scale", False))


def search_network_for(network: Transformer, precision: str = "auto", packed: bool = True) -> Transformer:
    """The network beam search should run: for ``auto`` int8 where it can be (a float32 network on the CPU whose
    PyTorch has the kernels); for ``fp32`` (and ``auto`` where int8 cannot be) the packed full-precision copy where
    that can be and `packed` allows it (`viz_model.nn.packed`), else `network` itself. ``int8`` where it cannot be
    is an error naming why."""
    if precision not in SEARCH_PRECISIONS:
        raise ValueError(f"search precision must be one of {', '.join(SEARCH_PRECISIONS)}, got {precision!r}")
    first = next(network.parameters())
    why_not = ("it runs on the CPU only" if first.device.type != "cpu" else
               f"it quantizes float32 weights, this network's are {first.dtype}" if first.dtype != torch.float32
               else None)
    def full() -> Transformer:
        return (packed_search_network(network) if packed else None) or network

    if precision == "fp32" or (precision == "auto" and why_not):
        return full()
    if why_not:
        raise ValueError(f"int8 search is not possible here: {why_not}; use search precision fp32 or auto")
    if precision == "int8":
        try:
            return int8_search_network(network, strict=True)  # type: ignore[return-value]
        except QuantizationUnavailable as err:
            raise ValueError(f"{err}; use search precision fp32 or auto") from None
    return int8_search_network(network) or full()


class LazyInt8Copy:
    """One network's `int8_search_network`, built on first use and kept (thread-safe: one model serves many
    sessions); it drafts the network's full-precision searches. `build`: `int8_causal_network` for a language model."""

    def __init__(self, build: Callable[[Any], Any] = int8_search_network) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._built = False
        self._copy: Transformer | None = None

    @property
    def built(self) -> bool:
        """Whether the copy was built (and is held, where int8 kernels exist)."""
        return self._built

    def get(self, network: Transformer) -> Transformer | None:
        with self._lock:
            if not self._built:
                self._copy, self._built = self._build(network), True
        return self._copy
