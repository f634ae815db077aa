"""BLOOM: ALiBi (no positions in the input; its slopes, this project's ALiBi's), a LayerNorm on the embeddings,
LayerNorm pre-norm with a final norm, a tanh-GELU MLP, biases everywhere, the head tied to the embeddings. Its fused
``query_key_value`` holds each head's query, key and value side by side (``[q_h, k_h, v_h]`` per head), not all
queries first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, per_head_qkv, placed

LAYER_PARTS = {"input_layernorm": "attn_residual.norm", "post_attention_layernorm": "ffn_residual.norm",
               "self_attention.query_key_value": "self_attn.w_qkv", "self_attention.dense": "self_attn.w_o",
               "mlp.dense_h_to_4h": "ffn.w_1", "mlp.dense_4h_to_h": "ffn.w_2"}
LONGEST = 65_536  # ALiBi has no table of positions; BLOOM's config names no limit


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a BLOOM config.json."""
    if hf.get("apply_residual_connection_post_layernorm"):
        raise HFImportError(f"{path}: apply_residual_connection_post_layernorm = true is not implemented")
    if hf.get("pretraining_tp", 1) != 1 and hf.get("slow_but_exact"):
        raise HFImportError(f"{path}: slow_but_exact with pretraining_tp {hf['pretraining_tp']} is not implemented")
    d_model = int(hf.get("hidden_size") or need(hf, "n_embed", path))
    return decoder_config(hf, path, end_ids(path.parent, hf), decoder_layers=int(need(hf, "n_layer", path)),
                          d_model=d_model, heads=int(need(hf, "n_head", path)), d_ff=4 * d_model,
                          max_positions=LONGEST, positional="alibi", embedding_norm=True,
                          norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)), activation="gelu_new",
                          tied_head=bool(hf.get("tie_word_embeddings", True)))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of BLOOM's tensors (``transformer.`` prefix or none): each head's fused rows split into Q, K
    and V."""
    prefix = "transformer." if any(k.startswith("transformer.") for k in state) else ""
    names = {"embedding.weight": f"{prefix}word_embeddings.weight",
             "embedding_norm.weight": f"{prefix}word_embeddings_layernorm.weight",
             "embedding_norm.bias": f"{prefix}word_embeddings_layernorm.bias",
             "final_norm.weight": f"{prefix}ln_f.weight", "final_norm.bias": f"{prefix}ln_f.bias"}
    for i in range(cfg.decoder_layers):
        for theirs, ours in LAYER_PARTS.items():
            for kind in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}h.{i}.{theirs}.{kind}"
    return per_head_qkv(placed(state, names, {"lm_head.weight"} if cfg.tied_head else set(), path), cfg)


FAMILY = Family("BLOOM", lm_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random BLOOM models (ALiBi, embedding norm, fused per-head Q/K/V)",
                decoder_only=True)
