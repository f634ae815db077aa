"""Gemma (1): a Llama with Gemma's RMS norm (gain ``1 + w``, in float32), embeddings scaled by sqrt(hidden_size) in
their own dtype, GeGLU (tanh GELU; the legacy ``hidden_act="gelu"`` means it too, as transformers reads it), a head
width of its own (``head_dim``) and the head tied to the embeddings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import ModelConfig
from .llama import family, llama_config


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None,
                 **values: Any) -> ModelConfig:
    """Our `ModelConfig` of a Gemma config (`values`: what Gemma 2 / 3 set besides)."""
    act = hf.get("hidden_act") or hf.get("hidden_activation") or "gelu_pytorch_tanh"
    act = "gelu_pytorch_tanh" if act == "gelu" else act
    return llama_config({**hf, "hidden_act": act, "tie_word_embeddings": hf.get("tie_word_embeddings", True)}, path,
                        normalization="gemma", scale_embeddings=True, **values)


FAMILY = family("Gemma", model_config, "small random Gemma models (Gemma's norm, scaled embeddings, GeGLU)")
