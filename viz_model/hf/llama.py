"""Llama 2 / 3.x (SmolLM2 is a Llama): RMSNorm pre-norm, SwiGLU, grouped-query attention, RoPE (default, linear or
llama3 scaling), an untied or tied head. Mistral (`mistral`) and Qwen2 (`qwen2`) are this with a sliding window and
Qwen2's Q/K/V biases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, placed, rope_settings

ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_new"}
LAYER_PARTS = {"self_attn.q_proj": "self_attn.w_q", "self_attn.k_proj": "self_attn.w_k",
               "self_attn.v_proj": "self_attn.w_v", "self_attn.o_proj": "self_attn.w_o",
               "mlp.gate_proj": "ffn.w_1", "mlp.up_proj": "ffn.w_3", "mlp.down_proj": "ffn.w_2",
               "input_layernorm": "attn_residual.norm", "post_attention_layernorm": "ffn_residual.norm",
               "self_attn.q_norm": "self_attn.q_norm", "self_attn.k_norm": "self_attn.k_norm"}  # Qwen3's


def llama_config(hf: dict[str, Any], path: Path, partial_rotary: bool = False, **values: Any) -> ModelConfig:
    """Our `ModelConfig` of a Llama-family config.json (`values`: what a variant sets besides; `partial_rotary`: its
    partial_rotary_factor read, not refused: Phi-3)."""
    act = hf.get("hidden_act", "silu")
    if act not in ACTIVATIONS:
        raise HFImportError(f"{path}: hidden_act {act!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    if hf.get("pretraining_tp", 1) != 1:
        raise HFImportError(f"{path}: pretraining_tp {hf['pretraining_tp']} is not implemented")
    heads = int(need(hf, "num_attention_heads", path))
    kv_heads = int(hf.get("num_key_value_heads") or heads)
    d_model = int(need(hf, "hidden_size", path))
    head_dim = hf.get("head_dim") or d_model // heads
    settings = dict(decoder_layers=int(need(hf, "num_hidden_layers", path)), d_model=d_model, heads=heads,
                    kv_heads=None if kv_heads == heads else kv_heads,
                    d_kv=None if head_dim * heads == d_model else int(head_dim),
                    d_ff=int(need(hf, "intermediate_size", path)),
                    max_positions=int(need(hf, "max_position_embeddings", path)), positional="rope",
                    normalization="rms", norm_eps=float(hf.get("rms_norm_eps", 1e-6)), activation=ACTIVATIONS[act],
                    gated_ffn=True, attention_bias=bool(hf.get("attention_bias", False)),
                    ffn_bias=bool(hf.get("mlp_bias", False)), tied_head=bool(hf.get("tie_word_embeddings", False)))
    rope = rope_settings(hf, path, int(head_dim) if partial_rotary else None)
    return decoder_config(hf, path, end_ids(path.parent, hf), **{**settings, **rope, **values})


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    return llama_config(hf, path)


def layer_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path, parts: dict[str, str],
                  tensors: dict[str, str] | None = None) -> dict[str, Tensor]:
    """Our state dict of a Llama-family checkpoint's tensors (``model.`` prefix or none), each layer's by `parts`
    (their name: ours, each a weight and maybe a bias) and `tensors` (their name: ours, a tensor of its own:
    gpt-oss's sinks and experts); every tensor used once."""
    prefix = "model." if any(k.startswith("model.") for k in state) else ""
    names = {"embedding.weight": f"{prefix}embed_tokens.weight", "final_norm.weight": f"{prefix}norm.weight"}
    if not cfg.tied_head:
        names["lm_head.weight"] = "lm_head.weight"
    for i in range(cfg.decoder_layers):
        for theirs, ours in parts.items():
            for kind in ("weight", "bias"):
                if f"{prefix}layers.{i}.{theirs}.{kind}" in state:
                    names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}layers.{i}.{theirs}.{kind}"
        for theirs, ours in (tensors or {}).items():
            names[f"layers.{i}.{ours}"] = f"{prefix}layers.{i}.{theirs}"
    ignored = {"lm_head.weight"} if cfg.tied_head else set()
    return placed(state, names, ignored, path)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of a Llama-family checkpoint's tensors."""
    return layer_weights(state, cfg, path, LAYER_PARTS)


def family(label: str, config: Any, tested: str, weights: Any = None) -> Family:
    """A Llama-family `Family` with its own config reading (and weight mapping, where given)."""
    return Family(label, lm_tokenizer, config, weights or map_weights, conversion_lines, lambda *_: None,
                  "tokenizer.json", tested, decoder_only=True)


FAMILY = family("Llama 2 / 3.x, SmolLM2", model_config, "small random Llama models (grouped-query attention, "
                "default and llama3 RoPE)")
