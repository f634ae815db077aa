"""gpt-oss: a Llama-family layer with attention biases, a learned sink logit in every head (``self_attn.sinks``),
sliding-window layers where ``layer_types`` marks them, YaRN, and a mixture of experts of its own (`ClampedExperts`:
a router with a bias, the softmax of the top k logits, interleaved gate / up projections with biases, clamped at
``swiglu_limit``, a GLU with ``swiglu_alpha``). Quantized checkpoints (MXFP4, as the hub's) are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import HFImportError, need
from .gemma2 import window_settings
from .llama import LAYER_PARTS as LLAMA_PARTS
from .llama import family, layer_weights, llama_config

ATTENTION_PARTS = {theirs: ours for theirs, ours in LLAMA_PARTS.items() if not theirs.startswith("mlp.")}
EXPERT_TENSORS = ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias")


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    if hf.get("quantization_config"):
        method = hf["quantization_config"].get("quant_method", "?") if isinstance(hf["quantization_config"], dict) \
            else "?"
        raise HFImportError(f"{path}: quantization_config ({method}) is not implemented: import a checkpoint saved "
                            "in full precision (transformers dequantizes one with Mxfp4Config(dequantize=True))")
    return llama_config(hf, path, experts=int(need(hf, "num_local_experts", path)),
                        experts_per_token=int(hf.get("num_experts_per_tok", 4)),
                        expert_limit=float(hf.get("swiglu_limit", 7.0)),
                        expert_alpha=float(hf.get("swiglu_alpha", 1.702)), learned_sinks=True,
                        **window_settings(hf, path))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of a gpt-oss checkpoint as transformers saves it: attention with biases and sinks, the
    router's weight and bias, the experts' stacked tensors."""
    tensors = {"self_attn.sinks": "self_attn.sinks", **{f"mlp.experts.{n}": f"ffn.{n}" for n in EXPERT_TENSORS}}
    return layer_weights(state, cfg, path, {**ATTENTION_PARTS, "mlp.router": "ffn.router"}, tensors)


FAMILY = family("gpt-oss", model_config, "small random gpt-oss models (learned sinks, sliding layers, YaRN, "
                "4 experts, top 2)", map_weights)
