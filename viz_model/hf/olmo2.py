"""OLMo 2: a Llama whose sub-layers norm their output, not their input (``x + norm(attn(x))``, ``x + norm(mlp(x))``:
``post_attention_layernorm``, ``post_feedforward_layernorm``), with RMS norms on the queries and on the keys over all
heads at once (``q_norm`` over heads x head width, ``k_norm`` over the key/value heads'), before the heads are split
and rotated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .llama import LAYER_PARTS as LLAMA_PARTS
from .llama import family, layer_weights, llama_config

LAYER_PARTS = {**{theirs: ours for theirs, ours in LLAMA_PARTS.items() if not theirs.endswith("layernorm")},
               "post_attention_layernorm": "attn_residual.post_norm",
               "post_feedforward_layernorm": "ffn_residual.post_norm"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    return llama_config(hf, path, sandwich_norm=True, input_norm=False, qk_norm=True, joint_qk_norm=True)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of an OLMo 2 checkpoint: the norms after the sub-layers."""
    return layer_weights(state, cfg, path, LAYER_PARTS)


FAMILY = family("OLMo 2", model_config, "small random OLMo 2 models (norms after the sub-layers, query/key norms over "
                "all heads)", map_weights)
