"""Mistral: a Llama whose every layer sees its last ``sliding_window`` keys (where the config sets one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import ModelConfig
from .llama import family, llama_config


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    window = hf.get("sliding_window")
    return llama_config(hf, path, sliding_window=None if window is None else int(window))


FAMILY = family("Mistral", model_config, "small random Mistral models with a sliding window")
