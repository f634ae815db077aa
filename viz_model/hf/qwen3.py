"""Qwen3: a Llama whose heads' queries and keys are RMS-normed before RoPE (``q_norm``, ``k_norm``), with Qwen2's
sliding layers where ``use_sliding_window`` is set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import ModelConfig
from .llama import family, llama_config
from .qwen2 import window_settings


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    return llama_config(hf, path, qk_norm=True, **window_settings(hf, path))


FAMILY = family("Qwen3", model_config, "small random Qwen3 models (query/key norms, sliding layers)")
