"""Phi-3 (and Phi-4-mini): a Llama whose Q, K and V are one projection (``qkv_proj``: all queries, then all keys, then
all values) and whose gate and up projections are one (``gate_up_proj``: the gate's rows first), with partial rotary
where ``partial_rotary_factor`` is set and a sliding window on every layer where ``sliding_window`` is; RoPE's
``longrope`` scaling (Phi-3's 128k models) is refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..config import ModelConfig
from .llama import LAYER_PARTS as LLAMA_PARTS
from .llama import family, layer_weights, llama_config

LAYER_PARTS = {**{theirs: ours for theirs, ours in LLAMA_PARTS.items()
                  if theirs.endswith(("o_proj", "down_proj", "layernorm"))},
               "self_attn.qkv_proj": "self_attn.w_qkv", "mlp.gate_up_proj": "ffn.w_13"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    window = hf.get("sliding_window")
    return llama_config(hf, path, partial_rotary=True, sliding_window=None if window is None else int(window))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of a Phi-3 checkpoint: the fused projections split by rows."""
    mapped: dict[str, Tensor] = {}
    kv = (cfg.kv_heads or cfg.heads) * cfg.d_head
    for name, tensor in layer_weights(state, cfg, path, LAYER_PARTS).items():
        if ".w_qkv." in name:
            parts = dict(zip(("w_q", "w_k", "w_v"), torch.split(tensor, [cfg.heads * cfg.d_head, kv, kv])))
        elif ".w_13." in name:
            parts = dict(zip(("w_1", "w_3"), torch.split(tensor, cfg.d_ff)))
        else:
            mapped[name] = tensor
            continue
        for part, piece in parts.items():
            mapped[name.replace(name.split(".")[-2], part)] = piece.contiguous()
    return mapped


FAMILY = family("Phi-3", model_config, "small random Phi-3 models (fused Q/K/V and gate/up, partial rotary, a sliding "
                "window)", map_weights)
