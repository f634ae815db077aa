"""Import a Hugging Face decoder-only language model (GPT-2, Llama, Mistral, Qwen2) as this project's model
directory: config.json (kind "decoder"), the tokenizer as transformers 5 builds it, and ``weight_source.json`` naming
the folder's safetensors files, read where they are (`viz_model.hf.mapped_load`); with ``copy`` (or a folder of
``pytorch_model.bin`` only) the weights in this project's names instead. Written beside its final place and renamed
into it: a failure leaves nothing behind."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from ..modeldir.checkpoint import (
    MAX_WEIGHTS_BYTES,
    atomic_write_bytes,
    planned_model,
    save_model_dir,
    save_model_files,
    saved_digests,
)
from ..modeldir.weight_source import WEIGHT_SOURCE, WeightSourceError, mapped_tensors, plain_name, stamped
from ..nn.causal_lm import CausalLM
from .arguments import argument
from .common import MAX_HF_CONFIG_BYTES, Family, HFImportError, read_json_file, write_staged

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
SINGLE, INDEX = "model.safetensors", "model.safetensors.index.json"


def card(label: str, hf: dict[str, Any], family: Family, lines: list[str], weights: Path) -> str:
    """What was imported from where and what the tests compare."""
    return "\n".join([f"# {label} (imported)", "",
                      f"Imported from the Hugging Face model `{label}` ({hf.get('model_type')}, {weights.name}) by "
                      "`viz-model import`. Its own model card, training data and licence are the source model's.", "",
                      "## Conversion", "", *lines, "",
                      "- Exactness against transformers' eager attention (every map, the logits, greedy continuations) "
                      f"is tested in `tests/library/test_hf_import_lm.py` on {family.tested}.", ""])


def safetensors_files(folder: Path) -> list[str]:
    """The names of the folder's safetensors weight files: ``model.safetensors``, else the shards its
    ``model.safetensors.index.json`` names ([] where it has neither); one line for a bad index."""
    if (folder / SINGLE).is_file():
        return [SINGLE]
    index = folder / INDEX
    if not index.is_file():
        return []
    data = read_json_file(index, MAX_HF_CONFIG_BYTES * 64, "not a weight index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise HFImportError(f"{index}: no weight_map naming each tensor's file")
    try:
        names = sorted({plain_name(name, index) for name in weight_map.values()})
    except WeightSourceError as err:
        raise HFImportError(str(err)) from None
    for name in names:
        if not (folder / name).is_file():
            raise HFImportError(f"{folder / name}: missing (named by {INDEX})")
    return names


def import_language_model(family: Family, folder: Path, hf: dict[str, Any], out: Path, label: str,
                          read_weights: Any, dtype: str = "fp32", source_lang: str | None = None,
                          target_lang: str | None = None, copy: bool = False) -> Path:
    """Import the decoder-only model of `folder` (config.json `hf`, of `family`) as the model directory `out`, its
    weights read where they are; `copy`: a self-contained directory with its own weights file (as a folder of
    ``pytorch_model.bin`` only always gets), `read_weights` the importer's reader of the folder's tensors; a language
    pair given is refused (a language model has none)."""
    path = folder / "config.json"
    cfg = family.model_config(hf, path, 0, None)
    tokenizer = family.tokenizer(folder, hf, source_lang, target_lang)
    names = safetensors_files(folder)
    lines = family.conversion_lines(cfg)
    if names and not copy:
        if dtype != "fp32":
            raise HFImportError(f"{argument('dtype', dtype, quoted=False)} stores a copy of the weights in that "
                                "precision; a language model's weights are read where they are, in their own dtype "
                                "(leave it out, or import a copy: viz-model import --copy)")
        state, weights = folder_tensors(folder, names, read_weights)
        mapped = family.map_weights(state, cfg, weights)  # every tensor placed once, else one line
        shapes = planned_model(cfg)[0]
        wrong = sorted(name for name, tensor in mapped.items() if tuple(tensor.shape) != shapes.get(name))
        if wrong or set(shapes) != set(mapped):
            raise HFImportError(f"{folder / names[0]}: tensor shapes do not match config.json "
                                f"({', '.join((wrong or sorted(set(shapes) ^ set(mapped)))[:5])})")
        del state, mapped
        source = stamped(folder, names, hf["model_type"], saved_digests(cfg, tokenizer))

        def write(staging: Path) -> None:
            save_model_files(cfg, tokenizer, staging, card(label, hf, family, lines + read_lines(names), weights))
            atomic_write_bytes(staging / WEIGHT_SOURCE, source.to_json().encode())

        return write_staged(out, write)
    stored = sum(math.prod(shape) for shape in planned_model(cfg)[0].values()) * DTYPES[dtype].itemsize
    if stored > MAX_WEIGHTS_BYTES:
        raise HFImportError(f"{folder}: {stored / 1024**3:.2f} GiB of {dtype} weights, above the "
                            f"{MAX_WEIGHTS_BYTES / 1024**3:.0f} GiB weight-file limit of a copy")
    state, weights = folder_tensors(folder, names, read_weights)
    model = CausalLM.for_loading(cfg)
    model.load_state_dict(family.map_weights(state, cfg, weights), strict=True)
    model.eval()
    return write_staged(out, lambda staging: save_model_dir(model, tokenizer, staging, dtype=DTYPES[dtype],
                                                            card=card(label, hf, family, lines, weights)))


def folder_tensors(folder: Path, names: list[str], read_weights: Any) -> tuple[dict[str, torch.Tensor], Path]:
    """The folder's tensors (memory-mapped from its safetensors files `names`, else `read_weights`'s) and the file
    messages name."""
    if not names:
        return read_weights(folder)
    try:
        return mapped_tensors([folder / name for name in names]), folder / names[0]
    except WeightSourceError as err:
        raise HFImportError(str(err)) from None


def read_lines(names: list[str]) -> list[str]:
    """How the weights are read, for the model card."""
    return [f"- Weights read where they are, memory-mapped from the source folder's {', '.join(names)} (see "
            f"{WEIGHT_SOURCE}); in their own dtype on a GPU, in fp32 on the CPU. A changed or missing file is "
            "refused."]
