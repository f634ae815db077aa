"""Mixtral: a Mistral whose feed-forward network is a mixture of experts (``num_local_experts`` gated SiLU experts,
``num_experts_per_tok`` of them for each token, chosen and weighted by the router ``block_sparse_moe.gate``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import need
from .llama import LAYER_PARTS as LLAMA_PARTS
from .llama import family, layer_weights, llama_config

ATTENTION_PARTS = {theirs: ours for theirs, ours in LLAMA_PARTS.items() if not theirs.startswith("mlp.")}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    window = hf.get("sliding_window")
    return llama_config(hf, path, sliding_window=None if window is None else int(window),
                        experts=int(need(hf, "num_local_experts", path)),
                        experts_per_token=int(hf.get("num_experts_per_tok", 2)))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of a Mixtral checkpoint (the hub's layout, which transformers saves): each expert's w1 (gate),
    w3 (up) and w2 (down), the router."""
    experts = {f"block_sparse_moe.experts.{j}.w{n}": f"ffn.experts.{j}.w_{n}" for j in range(cfg.experts)
               for n in (1, 2, 3)}
    return layer_weights(state, cfg, path, {**ATTENTION_PARTS, "block_sparse_moe.gate": "ffn.gate", **experts})


FAMILY = family("Mixtral", model_config, "small random Mixtral models (a mixture of experts, top-2 routing)",
                map_weights)
