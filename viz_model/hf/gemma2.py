"""Gemma 2: Gemma with four norms a layer (each sub-layer's output normed too: ``sandwich_norm``), scores divided by
sqrt(query_pre_attn_scalar) and soft-capped (``attn_logit_softcapping``), the logits soft-capped
(``final_logit_softcapping``), a sliding window on the layers ``layer_types`` marks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import HFImportError, need
from .gemma import model_config as gemma_config
from .llama import family, layer_weights

LAYER_PARTS = {"self_attn.q_proj": "self_attn.w_q", "self_attn.k_proj": "self_attn.w_k",
               "self_attn.v_proj": "self_attn.w_v", "self_attn.o_proj": "self_attn.w_o",
               "self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm",
               "mlp.gate_proj": "ffn.w_1", "mlp.up_proj": "ffn.w_3", "mlp.down_proj": "ffn.w_2",
               "input_layernorm": "attn_residual.norm", "post_attention_layernorm": "attn_residual.post_norm",
               "pre_feedforward_layernorm": "ffn_residual.norm",
               "post_feedforward_layernorm": "ffn_residual.post_norm"}


def sliding_layers(hf: dict[str, Any], path: Path) -> tuple[int, ...]:
    """The layers ``layer_types`` marks as sliding (transformers saves the list)."""
    types = need(hf, "layer_types", path)
    if not isinstance(types, list) or len(types) != int(hf["num_hidden_layers"]) or \
            not set(types) <= {"full_attention", "sliding_attention"}:
        raise HFImportError(f"{path}: layer_types must list full_attention or sliding_attention for each layer")
    return tuple(i for i, kind in enumerate(types) if kind == "sliding_attention")


def window_settings(hf: dict[str, Any], path: Path) -> dict[str, Any]:
    window, sliding = hf.get("sliding_window"), sliding_layers(hf, path)
    return {"sliding_window": int(window), "sliding_layers": sliding} if window is not None and sliding else {}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    caps = {name: None if hf.get(key) is None else float(hf[key]) for name, key in (
        ("attention_softcap", "attn_logit_softcapping"), ("logit_softcap", "final_logit_softcapping"))}
    return gemma_config(hf, path, sandwich_norm=True, query_scalar=float(need(hf, "query_pre_attn_scalar", path)),
                        **caps, **window_settings(hf, path))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of a Gemma 2 / 3 text checkpoint: four norms a layer."""
    return layer_weights(state, cfg, path, LAYER_PARTS)


FAMILY = family("Gemma 2", model_config, "small random Gemma 2 models (sandwich norms, soft caps, sliding layers)",
                map_weights)
