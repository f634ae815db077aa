"""A language model directory whose weights are read where they are: the source folder's safetensors files mapped
into memory, renamed by the family's own mapping, and assigned to a network built on the meta device, so loading
holds no second copy. On the CPU bf16 / fp16 weights are upcast to fp32 (the computation is exact there); on a GPU
they keep their dtype."""

from __future__ import annotations

from pathlib import Path

import torch

from ..modeldir.checkpoint import CheckpointError, check_model_dir, weight_source
from ..modeldir.weight_source import WeightSourceError, mapped_tensors
from ..nn.causal_lm import CausalLM
from ..tokenization.imported import PretrainedTokenizer
from .common import HFImportError
from .importer import FAMILIES


def compute_dtype(device: torch.device, stored: torch.dtype) -> torch.dtype:
    """The dtype a network whose weights are stored in `stored` runs in on `device`: fp32 on the CPU, else
    `stored` (a floating dtype)."""
    return torch.float32 if device.type == "cpu" or not stored.is_floating_point else stored


def mapped_model(directory: Path, device: torch.device) -> tuple[CausalLM, PretrainedTokenizer]:
    """The network and tokenizer of `directory` (checked as `check_model_dir` checks, the source's files unchanged),
    the weights mapped from their source, in the dtype `compute_dtype` gives for `device` (still on the CPU)."""
    config, tokenizer = check_model_dir(directory)
    source = weight_source(directory)
    assert source is not None, "mapped_model reads a directory with a weight source"
    family = FAMILIES.get(source.model_type)
    if family is None or not family.decoder_only:
        raise CheckpointError(f"{directory}: weight source of model_type {source.model_type!r}, not a language "
                              "model this project imports")
    try:
        mapped = family.map_weights(mapped_tensors(source.paths), config, source.paths[0])
    except (WeightSourceError, HFImportError) as err:
        raise CheckpointError(str(err)) from None
    dtype = compute_dtype(device, mapped["embedding.weight"].dtype)
    for name in list(mapped):  # one tensor at a time: a converted copy replaces its mapped original
        if mapped[name].is_floating_point():
            mapped[name] = mapped[name].to(dtype)
    with torch.device("meta"):
        network = CausalLM(config)
    try:
        network.load_state_dict(mapped, strict=True, assign=True)
    except RuntimeError as err:
        raise CheckpointError(f"{source.paths[0]}: does not fit {directory / 'config.json'} "
                              f"({str(err).splitlines()[-1].strip()})") from None
    left = [name for name, tensor in (*network.named_parameters(), *network.named_buffers()) if tensor.is_meta]
    if left:
        raise CheckpointError(f"{directory}: no weights for {', '.join(left[:5])}")
    return network.eval(), tokenizer  # type: ignore[return-value]
