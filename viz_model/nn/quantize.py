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
import warnings

import torch
from torch import nn

from .attention import KVCache, MultiHeadAttention
from .model import DecoderLayer, Transformer

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
    """An `Int8Linear` of many output rows (a vocabulary projection) built and run as blocks of rows: the same
    numbers (one scale per row, the input quantized alike in every block), but building it never holds more than a
    block's int8 copies at once (~30 MB less peak memory for a 58k-row projection)."""

    def __init__(self, weight: torch.Tensor, rows: int = 8192) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Int8Linear(part, None) for part in weight.split(rows))
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([block(x) for block in self.blocks], dim=-1)

    __call__ = forward


class Int8SelfAttention(MultiHeadAttention):
    """Self-attention with int8 weights whose Q, K and V projections are one matrix ``[W_Q; W_K; W_V]``: one kernel
    call per step instead of three (the per-call overhead is what a decoding step waits on)."""

    def __init__(self, attn: MultiHeadAttention) -> None:
        nn.Module.__init__(self)
        self.d_model, self.heads, self.d_head, self.dropout = attn.d_model, attn.heads, attn.d_head, attn.dropout
        self.inner, self.scale = attn.inner, attn.scale
        parts = (attn.w_q, attn.w_k, attn.w_v)
        biases = None if attn.w_q.bias is None else torch.cat([p.bias for p in parts])
        self.w_qkv = Int8Linear(torch.cat([p.weight for p in parts]), biases)
        self.w_o = Int8Linear(attn.w_o.weight, attn.w_o.bias)

    def project(self, query: torch.Tensor, source: torch.Tensor | None = None) -> tuple[torch.Tensor, KVCache]:
        if source is not None:
            raise ValueError("Int8SelfAttention attends from a sequence to itself: source must be None")
        q, k, v = self.w_qkv(query).split(self.inner, dim=-1)
        return self.split_heads(q), KVCache(self.split_heads(k), self.split_heads(v))


def _with_int8_linears(module: nn.Module) -> nn.Module:
    """A shallow copy of `module` whose Linear layers (at any depth) are int8, decoder self-attention fused; every
    other tensor is shared."""
    if isinstance(module, nn.Linear):
        return Int8Linear(module.weight, module.bias)
    if isinstance(module, DecoderLayer):
        clone = copy.copy(module)
        clone._modules = {name: (Int8SelfAttention(child) if name == "self_attn" else _with_int8_linears(child))
                          for name, child in module._modules.items()}
        return clone
    clone = copy.copy(module)  # new __dict__, same parameter and buffer tensors
    clone._modules = {name: None if child is None else _with_int8_linears(child)
                      for name, child in module._modules.items()}
    return clone


def int8_search_network(network: Transformer, strict: bool = False) -> Transformer | None:
    """A copy of `network` (on the CPU, in eval mode) for beam search whose decoder Linear layers and vocabulary
    projection (tied or not) are int8, or None where this PyTorch cannot run int8 Linear layers. The encoder runs
    once per sentence, so it stays full precision (shared, not copied). With `strict`, missing kernels raise
    `QuantizationUnavailable` instead."""
    if next(network.parameters()).device.type != "cpu":
        raise ValueError("int8 search runs on the CPU only")
    if network.training:
        raise ValueError("quantize a network in eval mode (dropout off)")
    try:
        clone = copy.copy(network)  # the encoder runs once per sentence: it stays full precision, shared
        clone._modules = dict(network._modules)
        clone.decoder_layers = _with_int8_linears(network.decoder_layers)
        clone.output_projection = Int8RowBlocks(
            network.tgt_embedding.weight if network.output_projection is None else network.output_projection.weight)
    except QuantizationUnavailable as err:
        if strict:
            raise
        warnings.warn(f"{err}; searching in full precision", stacklevel=2)
        return None
    clone.shared_activation_scale = True  # see rows_interact
    return clone  # type: ignore[return-value]


def rows_interact(network: object) -> bool:
    """True for an int8 search network: each call quantizes its input with one scale for all rows, so the rows
    of a batch nudge each other's results. Batched translation then decodes one sentence per batch, so that a
    sentence's translation never depends on the sentences it was batched with (its beams do share a scale)."""
    return bool(getattr(network, "shared_activation_scale", False))


def search_network_for(network: Transformer, precision: str = "auto") -> Transformer:
    """The network beam search should run: for ``auto`` int8 where it can be (a float32 network on the CPU whose
    PyTorch has the kernels), else `network` itself; `network` itself for ``fp32``. ``int8`` where it cannot be is
    an error naming why."""
    if precision not in SEARCH_PRECISIONS:
        raise ValueError(f"search precision must be one of {', '.join(SEARCH_PRECISIONS)}, got {precision!r}")
    first = next(network.parameters())
    why_not = ("it runs on the CPU only" if first.device.type != "cpu" else
               f"it quantizes float32 weights, this network's are {first.dtype}" if first.dtype != torch.float32
               else None)
    if precision == "fp32" or (precision == "auto" and why_not):
        return network
    if why_not:
        raise ValueError(f"int8 search is not possible here: {why_not}; use search precision fp32 or auto")
    if precision == "int8":
        try:
            return int8_search_network(network, strict=True)  # type: ignore[return-value]
        except QuantizationUnavailable as err:
            raise ValueError(f"{err}; use search precision fp32 or auto") from None
    return int8_search_network(network) or network
