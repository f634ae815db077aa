"""Phi (phi-1, phi-1.5, phi-2): one LayerNorm a layer feeding the attention and the MLP side by side
(``x + attn(ln x) + mlp(ln x)``: a parallel layer whose two norms are that one), partial rotary
(``partial_rotary_factor``), biases on every projection and on the untied head, a tanh-GELU MLP, a final LayerNorm;
``qk_layernorm``: each head's queries and keys LayerNormed before the rotation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, placed, rope_settings
from .gpt2 import ACTIVATIONS

LAYER_PARTS = {"self_attn.q_proj": "self_attn.w_q", "self_attn.k_proj": "self_attn.w_k",
               "self_attn.v_proj": "self_attn.w_v", "self_attn.dense": "self_attn.w_o", "mlp.fc1": "ffn.w_1",
               "mlp.fc2": "ffn.w_2", "self_attn.q_layernorm": "self_attn.q_norm",
               "self_attn.k_layernorm": "self_attn.k_norm"}
SHARED_NORM = ("attn_residual.norm", "ffn_residual.norm")  # both read input_layernorm


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a Phi config.json."""
    act = hf.get("hidden_act", "gelu_new")
    if act not in ACTIVATIONS:
        raise HFImportError(f"{path}: hidden_act {act!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    d_model, heads = int(need(hf, "hidden_size", path)), int(need(hf, "num_attention_heads", path))
    kv_heads = int(hf.get("num_key_value_heads") or heads)
    head_dim = int(hf.get("head_dim") or d_model // heads)
    return decoder_config(hf, path, end_ids(path.parent, hf), decoder_layers=int(need(hf, "num_hidden_layers", path)),
                          d_model=d_model, heads=heads, kv_heads=None if kv_heads == heads else kv_heads,
                          d_kv=None if head_dim * heads == d_model else head_dim,
                          d_ff=int(need(hf, "intermediate_size", path)),
                          max_positions=int(need(hf, "max_position_embeddings", path)), positional="rope",
                          norm_eps=float(hf.get("layer_norm_eps", 1e-5)), activation=ACTIVATIONS[act],
                          parallel_residual=True, qk_norm=bool(hf.get("qk_layernorm", False)), head_bias=True,
                          tied_head=bool(hf.get("tie_word_embeddings", False)), **rope_settings(hf, path, head_dim))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of Phi's tensors (``model.`` prefix or none): each layer's one norm in both our norms' places."""
    prefix = "model." if any(k.startswith("model.") for k in state) else ""
    names = {"embedding.weight": f"{prefix}embed_tokens.weight", "lm_head.weight": "lm_head.weight",
             "lm_head.bias": "lm_head.bias", "final_norm.weight": f"{prefix}final_layernorm.weight",
             "final_norm.bias": f"{prefix}final_layernorm.bias"}
    for i in range(cfg.decoder_layers):
        layer = f"{prefix}layers.{i}."
        for kind in ("weight", "bias"):
            names.update({f"layers.{i}.{ours}.{kind}": f"{layer}input_layernorm.{kind}" for ours in SHARED_NORM})
            names.update({f"layers.{i}.{ours}.{kind}": f"{layer}{theirs}.{kind}" for theirs, ours in LAYER_PARTS.items()
                          if cfg.qk_norm or "layernorm" not in theirs})
    return placed(state, names, set(), path)


FAMILY = Family("Phi (phi-1, 1.5, 2)", lm_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random Phi models (parallel layer with one norm, partial rotary, head bias)",
                decoder_only=True)
