"""Import a Hugging Face decoder-only language model (GPT-2, Llama, Mistral, Qwen2) as this project's model
directory: config.json (kind "decoder"), the weights in this project's names, the tokenizer as transformers 5 builds
it. Written beside its final place and renamed into it: a failure leaves nothing behind."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from ..modeldir.checkpoint import MAX_WEIGHTS_BYTES, planned_model, save_model_dir
from ..nn.causal_lm import CausalLM
from .common import Family, HFImportError, write_staged

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def card(label: str, hf: dict[str, Any], family: Family, lines: list[str], weights: Path) -> str:
    """What was imported from where and what the tests compare."""
    return "\n".join([f"# {label} (imported)", "",
                      f"Imported from the Hugging Face model `{label}` ({hf.get('model_type')}, {weights.name}) by "
                      "`viz-model import`. Its own model card, training data and licence are the source model's.", "",
                      "## Conversion", "", *lines, "",
                      "- Exactness against transformers' eager attention (every map, the logits, greedy continuations) "
                      f"is tested in `tests/library/test_hf_import_lm.py` on {family.tested}.", ""])


def import_language_model(family: Family, folder: Path, hf: dict[str, Any], out: Path, label: str,
                          read_weights: Any, dtype: str = "fp32", source_lang: str | None = None,
                          target_lang: str | None = None) -> Path:
    """Import the decoder-only model of `folder` (config.json `hf`, of `family`) as the model directory `out`;
    `read_weights`: the importer's reader of the folder's tensors; a language pair given is refused (a language
    model has none)."""
    path = folder / "config.json"
    cfg = family.model_config(hf, path, 0, None)
    tokenizer = family.tokenizer(folder, hf, source_lang, target_lang)
    stored = sum(math.prod(shape) for shape in planned_model(cfg)[0].values()) * DTYPES[dtype].itemsize
    if stored > MAX_WEIGHTS_BYTES:
        raise HFImportError(f"{folder}: {stored / 1024**3:.2f} GiB of {dtype} weights, above the "
                            f"{MAX_WEIGHTS_BYTES / 1024**3:.0f} GiB weight-file limit")
    state, weights = read_weights(folder)
    model = CausalLM.for_loading(cfg)
    model.load_state_dict(family.map_weights(state, cfg, weights), strict=True)
    model.eval()
    lines = family.conversion_lines(cfg)
    return write_staged(out, lambda staging: save_model_dir(model, tokenizer, staging, dtype=DTYPES[dtype],
                                                            card=card(label, hf, family, lines, weights)))
