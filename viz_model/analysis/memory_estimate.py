"""The memory a language model and one trace of it will take, estimated before either is made (`estimate`,
`directory_estimate`), and `check_fits`, which refuses in one line naming the estimate and the memory available.

The parts, for a decoder of L layers, h query and g key/value heads of width d_h, width d, feed-forward width f,
vocabulary V, n tokens, in c bytes a value (the dtype the device computes in: fp32 on the CPU):

- weights: every parameter, as held: memory-mapped fp32 safetensors on the CPU are file-backed pages (the kernel
  reads them on first use and may drop them again: counted, but no copy); bf16 / fp16 ones on the CPU are upcast to
  an fp32 copy in memory; on a GPU, their own dtype in the GPU's memory;
- cache: the key/value cache, L x 2 x g x n x d_h, and with maps on demand the recipes' queries, L x h x n x d_h;
- maps: every map kept, L x h x n² (none on demand);
- activations: one layer's working set at its peak: the hidden states (about 8 n x d and 4 n x f) and the attention
  scores: 2 more h x n² while a layer's maps are made (the scores and the masked scores beside the softmax kept),
  else the n x n mask the fused kernel reads (boolean; float where a bias is added);
- logits: n x V, and the block of `ROWS_AT_ONCE` rows softmaxed at a time: in float32, and their float32 copy where
  c is not 4 bytes (made once the layers' working sets are let go: the total counts the larger of the two);
- trace: what the trace keeps besides (embeddings, positions, its n x n mask, a step a token);
- draft: the int8 copy `LanguageModel.draft_network` builds where it drafts a greedy continuation (CPU, float32, new
  tokens, maps kept or on demand, ``draft`` "int8", or "auto" at `DRAFT_MIN_PARAMETERS` parameters or more): a byte a
  weight of every Linear layer of the layers and of the output projection, and `INT8_ROW_BYTES` a row."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import ModelConfig
from ..hf.mapped_load import compute_dtype
from ..kinds.language_model import DRAFT_MIN_PARAMETERS, DRAFTS, ROWS_AT_ONCE
from ..modeldir.checkpoint import check_model_dir, network_class, planned_model, weight_source
from ..on_demand import MAP_MODES, keeps_full_maps

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SAFETENSORS_DTYPES = {"F32": "fp32", "BF16": "bf16", "F16": "fp16"}
STEP_BYTES = 1500  # one DecodingStep with its top-k lists, as Python objects
GB = 1024**3
MAX_HEADER_BYTES = 100 * 1024**2  # safetensors' own limit on a header
INT8_ROW_BYTES = 64  # an int8 Linear layer's bytes a row beside a byte a weight: scale, offsets, the kernel's packing


class MemoryFitError(ValueError):
    """A model and trace whose estimate exceeds the memory available."""


@dataclass(frozen=True)
class Estimate:
    """The bytes of each part (see the module's docstring) and how the weights are held.

    :ivar weights_held: "file-backed" (memory-mapped pages, no copy), "in memory" (a copy) or "on <device>"
    :ivar maps_mode: "full" or "on_demand" (what "auto" chose for `n_tokens`)
    """

    n_tokens: int
    device: str
    compute_dtype: str
    maps_mode: str
    weights: int
    weights_held: str
    cache: int
    maps: int
    activations: int
    logits: int
    trace: int
    draft: int = 0

    @property
    def total(self) -> int:
        """The peak of one trace with the model open: every part, the activations and logits not at once (a layer's
        working set is let go before the logits are made)."""
        return self.weights + self.draft + self.cache + self.maps + max(self.activations, self.logits) + self.trace

    @property
    def trace_bytes(self) -> int:
        """The trace's part alone (everything but the weights)."""
        return self.total - self.weights

    def trace_words(self) -> str:
        """The trace in words: "a 4,096-token trace, maps on demand, bfloat16 on cuda"."""
        maps = "every map kept" if self.maps_mode == "full" else "maps on demand"
        return f"a {self.n_tokens:,}-token trace, {maps}, {self.compute_dtype} on {self.device}"

    def summary(self) -> str:
        """One line: the total, then the weights (and how held) and the trace."""
        return (f"{gb(self.total)} ({gb(self.weights)} of weights, {self.weights_held}; {gb(self.trace_bytes)} for "
                f"{self.trace_words()})")


def gb(n_bytes: float) -> str:
    """Bytes written for a person: "12.3 GB", "0.52 GB", below 0.1 GB in MB ("35 MB")."""
    value = n_bytes / GB
    if value >= 1:
        return f"{value:.1f} GB"
    return f"{value:.2g} GB" if value >= 0.1 else f"{n_bytes / 1024**2:.3g} MB"


def parameter_count(config: ModelConfig) -> int:
    """The values of every saved tensor of `config`'s network (tied matrices once), counted on the meta device."""
    return sum(math.prod(shape) for shape in planned_model(config)[0].values())


def int8_draft_bytes(config: ModelConfig) -> int:
    """The bytes of the int8 copy `LanguageModel.draft_network` builds of `config`'s network (see the module's
    docstring); its other tensors are the network's own, shared."""
    with torch.device("meta"):
        network = network_class(config)(config)
    head = network.embedding if network.lm_head is None else network.lm_head
    shapes = [m.weight.shape for m in network.layers.modules() if isinstance(m, nn.Linear)] + [head.weight.shape]
    return sum(rows * (columns + INT8_ROW_BYTES) for rows, columns in shapes)


def estimate(config: ModelConfig, n_tokens: int, maps_mode: str = "auto", dtype: str = "fp32",
             device: str | torch.device = "cpu", mapped: bool = True, new_tokens: int = 0,
             draft: str = "auto") -> Estimate:
    """The memory of `config`'s decoder with its weights stored in `dtype` ("fp32", "bf16", "fp16"; `mapped`: read
    where they are, memory-mapped) on `device`, and of one `n_tokens`-token trace (`maps_mode` as `trace`'s maps)
    whose last `new_tokens` are a greedy continuation (`draft` as `LanguageModel.draft`: its int8 copy counted where
    it would be built)."""
    if config.kind != "decoder":
        raise ValueError(f"estimate covers decoder-only language models, not kind {config.kind!r}")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise ValueError(f"n_tokens must be a whole number of tokens, at least 1, got {n_tokens!r}")
    if maps_mode not in MAP_MODES:
        raise ValueError(f"maps_mode must be one of {', '.join(MAP_MODES)}, got {maps_mode!r}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or not 0 <= new_tokens < n_tokens:
        raise ValueError(f"new_tokens must be a whole number from 0 to n_tokens - 1 ({n_tokens - 1}), got "
                         f"{new_tokens!r}")
    if draft not in DRAFTS:
        raise ValueError(f"draft must be one of {', '.join(DRAFTS)}, got {draft!r}")
    where = torch.device(device)
    stored, computed = DTYPES[dtype], compute_dtype(where, DTYPES[dtype])
    full = keeps_full_maps(maps_mode, n_tokens)
    c, n, layers, heads = computed.itemsize, n_tokens, config.decoder_layers, config.heads
    d_head = config.d_kv or config.d_model // heads
    kv_heads = config.kv_heads or heads
    if where.type == "cpu":
        held = "file-backed" if mapped and stored == computed else "in memory"
    else:
        held = f"on {where.type}"
    cache = layers * 2 * kv_heads * n * d_head * c + (0 if full else layers * heads * n * d_head * c)
    hidden = n * (8 * config.d_model + 4 * config.d_ff) * c
    biased = config.positional in ("alibi", "relative")  # a score bias: the fused kernel reads a float mask
    scores = 2 * heads * n * n * c if full else n * n * (c + 1 if biased else 1)
    maps = layers * heads * n * n * (4 if where.type == "cpu" else c) if full else 0  # float32 numpy on the CPU
    softmaxed = min(n, ROWS_AT_ONCE) * config.vocab_size * (4 + (4 if c != 4 else 0))  # probabilities, a float32 copy
    logits = n * config.vocab_size * c + softmaxed
    parameters = parameter_count(config)
    drafted = new_tokens > 0 and where.type == "cpu" and computed == torch.float32 and (
        draft == "int8" or draft == "auto" and parameters >= DRAFT_MIN_PARAMETERS)
    return Estimate(n_tokens=n, device=where.type, compute_dtype=str(computed).removeprefix("torch."),
                    maps_mode="full" if full else "on_demand", weights=parameters * computed.itemsize,
                    weights_held=held, cache=cache, maps=maps, activations=hidden + scores, logits=logits,
                    trace=n * (2 * config.d_model * 4 + n + STEP_BYTES),
                    draft=int8_draft_bytes(config) if drafted else 0)


def stored_dtype(directory: Path) -> tuple[str, bool]:
    """The dtype a model directory's weights are stored in ("fp32", "bf16", "fp16") and whether they are read where
    they are (memory-mapped from a weight source); read from a safetensors header, no weight read."""
    source = weight_source(directory)
    path = source.paths[0] if source is not None else directory / "model.safetensors"
    try:
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(min(size, MAX_HEADER_BYTES)))
        kinds = {v["dtype"] for k, v in header.items() if k != "__metadata__" and v["dtype"] in SAFETENSORS_DTYPES}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: its safetensors header cannot be read ({type(err).__name__}: {err})") from None
    if not kinds:
        raise ValueError(f"{path}: no floating-point tensor in its header")
    return SAFETENSORS_DTYPES[sorted(kinds)[0] if len(kinds) == 1 else "F32"], source is not None


def directory_estimate(directory: str | Path, n_tokens: int, maps_mode: str = "auto",
                       device: str | torch.device = "cpu") -> Estimate:
    """`estimate` for a language model directory not yet opened (its config, its weights' stored dtype)."""
    config, _ = check_model_dir(Path(directory))
    dtype, mapped = stored_dtype(Path(directory))
    return estimate(config, n_tokens, maps_mode, dtype, device, mapped)


def model_estimate(model: Any, n_tokens: int, maps_mode: str = "auto", new_tokens: int = 0) -> Estimate:
    """`estimate` for an open `LanguageModel`: its config, device, its weights' stored dtype (its directory's
    header; without a directory, its parameters' dtype, held in memory) and its draft setting (the int8 copy not
    counted once it is held: `LanguageModel.draft_held`)."""
    directory = getattr(model, "directory", None)
    if directory is not None and Path(directory).is_dir():
        dtype, mapped = stored_dtype(Path(directory))
    else:
        held = str(next(model.network.parameters()).dtype).removeprefix("torch.")
        dtype, mapped = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[held], False
    return estimate(model.config, n_tokens, maps_mode, dtype, model.device, mapped, new_tokens,
                    "off" if model.draft_held else model.draft)


def available_bytes(device: str | torch.device = "cpu") -> int:
    """The memory available now: ``MemAvailable`` on the CPU, the free memory of a CUDA device."""
    where = torch.device(device)
    if where.type == "cuda":
        return int(torch.cuda.mem_get_info(where)[0])
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise OSError("/proc/meminfo has no MemAvailable")


@dataclass(frozen=True)
class TracePlan:
    """What the library decides before a trace, from its memory estimate: how the trace keeps its maps ("full" or
    "on_demand", the `Estimate.maps_mode` that fits) and its memory in one line ("Memory: the model ...")."""

    maps: str
    note: str


def plan_trace(model: Any, n_tokens: int, new_tokens: int = 0, maps: str = "auto") -> TracePlan:
    """Before an `n_tokens`-token trace of `model` (open: its weights held), the last `new_tokens` a continuation: how
    it keeps its maps (`maps`; "auto" as `LanguageModel.trace` decides it, but on demand where keeping every map would
    not fit) and its memory in one line; a `MemoryFitError` in one line naming the
    estimate, what is available and the model's size where the trace would not fit."""
    estimate = model_estimate(model, n_tokens, maps, new_tokens)
    available = available_bytes(model.device)
    if maps == "auto" and estimate.maps_mode == "full" and estimate.trace_bytes > available:
        estimate = model_estimate(model, n_tokens, "on_demand", new_tokens)
    try:
        check_fits(estimate, available, opened=True)
    except MemoryFitError as err:
        raise MemoryFitError(f"{err}. The model takes {gb(estimate.weights)} ({estimate.weights_held})") from None
    return TracePlan(estimate.maps_mode, f"Memory: the model {gb(estimate.weights)} ({estimate.weights_held}), this "
                     f"{n_tokens:,}-token trace about {gb(estimate.trace_bytes)} ({gb(available)} available now).")


def trace_report(model: Any, n_tokens: int, new_tokens: int = 0) -> str:
    """`plan_trace`'s line: the memory of an `n_tokens`-token trace of `model`, or its `MemoryFitError`."""
    return plan_trace(model, n_tokens, new_tokens).note


def check_fits(estimate: Estimate, available: int, opened: bool = False) -> None:
    """Nothing where `estimate` fits in `available` bytes (`opened`: the model is open already, its weights held, so
    the trace alone must fit); else a `MemoryFitError` naming both figures in one line."""
    if opened and estimate.trace_bytes > available:
        words, shorter = estimate.trace_words(), "a shorter prompt"
        raise MemoryFitError(f"{words[0].upper()}{words[1:]} would need about {gb(estimate.trace_bytes)}, but "
                             f"{gb(available)} is available on {estimate.device} with the model open: {shorter}"
                             + (" or maps on demand" if estimate.maps_mode == "full" else ""))
    if not opened and estimate.total > available:
        advice = ("the weights alone take more: a machine with more memory" if estimate.weights > available else
                  "a shorter prompt" + (" or maps on demand" if estimate.maps_mode == "full" else ""))
        raise MemoryFitError(f"would need about {estimate.summary()}, but {gb(available)} is available on "
                             f"{estimate.device}: {advice}")
