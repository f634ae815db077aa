"""Qwen2 / 2.5: a Llama with biases on the Q, K and V projections (none on the output), and a sliding window on the
layers its ``layer_types`` mark (``use_sliding_window``: layers from ``max_window_layers`` on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import ModelConfig
from .common import HFImportError
from .llama import family, llama_config


def sliding_layers(hf: dict[str, Any], path: Path) -> tuple[int, ...]:
    """The layers with a sliding window: those ``layer_types`` names so, else transformers' default rule."""
    layers = int(hf["num_hidden_layers"])
    types = hf.get("layer_types")
    if types is None:
        return tuple(i for i in range(layers) if i >= int(hf.get("max_window_layers", layers)))
    if not isinstance(types, list) or len(types) != layers or \
            not set(types) <= {"full_attention", "sliding_attention"}:
        raise HFImportError(f"{path}: layer_types must list full_attention or sliding_attention for each layer")
    return tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")


def window_settings(hf: dict[str, Any], path: Path) -> dict[str, Any]:
    """``sliding_window`` and ``sliding_layers`` where ``use_sliding_window`` is set and a layer slides, else {}."""
    window = hf.get("sliding_window") if hf.get("use_sliding_window") else None
    sliding = sliding_layers(hf, path) if window is not None else ()
    return {"sliding_window": int(window), "sliding_layers": sliding} if window is not None and sliding else {}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    return llama_config({**hf, "attention_bias": False}, path, qkv_bias=True, **window_settings(hf, path))


FAMILY = family("Qwen2 / 2.5", model_config, "small random Qwen2 models (Q/K/V biases, sliding layers)")
