"""Gemma 3 text (``gemma3_text``, Gemma3ForCausalLM): Gemma 2's layer without its attention soft cap (transformers
never passes it), Gemma-style norms on each head's queries and keys before RoPE, and two RoPEs: the sliding layers'
local base, unscaled, and the full layers' base with its scaling. The multimodal ``gemma3`` is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import ModelConfig
from .common import HFImportError, need
from .gemma import model_config as gemma_config
from .gemma2 import map_weights, window_settings
from .llama import family


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    params = hf.get("rope_parameters") or {}
    full, local = params.get("full_attention"), params.get("sliding_attention")
    if not isinstance(full, dict) or not isinstance(local, dict):
        raise HFImportError(f"{path}: rope_parameters must hold full_attention and sliding_attention settings")
    if local.get("rope_type", "default") != "default":
        raise HFImportError(f"{path}: the sliding layers' rope_type {local['rope_type']!r} is not implemented "
                            "(default is)")
    cap = hf.get("final_logit_softcapping")
    windows = window_settings(hf, path)
    return gemma_config({**hf, "rope_parameters": full}, path, sandwich_norm=True, qk_norm=True,
                        query_scalar=float(need(hf, "query_pre_attn_scalar", path)),
                        logit_softcap=None if cap is None else float(cap), **windows,
                        local_rope_base=float(local.get("rope_theta", 10000.0)) if windows else None)


FAMILY = family("Gemma 3 (text)", model_config, "small random Gemma 3 text models (two RoPEs, query/key norms)",
                map_weights)
