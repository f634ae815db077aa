"""GPT-NeoX / Pythia: parallel residual (``x + attn(ln1 x) + mlp(ln2 x)``; sequential where
``use_parallel_residual`` is off), partial rotary (the first ``rotary_pct`` of each head's dimensions turn), a fused
``query_key_value`` holding each head's query, key and value side by side, LayerNorm, an erf-GELU MLP, biases on
every projection but the head, and the head untied (``embed_out`` in Pythia's files, ``lm_head`` in transformers
5's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, per_head_qkv, placed, rope_settings

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "relu": "relu",
               "silu": "silu"}
LAYER_PARTS = {"input_layernorm": "attn_residual.norm", "post_attention_layernorm": "ffn_residual.norm",
               "attention.query_key_value": "self_attn.w_qkv", "attention.dense": "self_attn.w_o",
               "mlp.dense_h_to_4h": "ffn.w_1", "mlp.dense_4h_to_h": "ffn.w_2"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a GPT-NeoX config.json."""
    act = hf.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        raise HFImportError(f"{path}: hidden_act {act!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    d_model, heads = int(need(hf, "hidden_size", path)), int(need(hf, "num_attention_heads", path))
    bias = bool(hf.get("attention_bias", True))
    return decoder_config(hf, path, end_ids(path.parent, hf), decoder_layers=int(need(hf, "num_hidden_layers", path)),
                          d_model=d_model, heads=heads, d_ff=int(need(hf, "intermediate_size", path)),
                          max_positions=int(need(hf, "max_position_embeddings", path)), positional="rope",
                          norm_eps=float(hf.get("layer_norm_eps", 1e-5)), activation=ACTIVATIONS[act],
                          attention_bias=bias, tied_head=bool(hf.get("tie_word_embeddings", False)),
                          parallel_residual=bool(hf.get("use_parallel_residual", True)),
                          **rope_settings(hf, path, d_model // heads))


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of GPT-NeoX's tensors (``gpt_neox.`` prefix or none): each head's fused rows split into Q, K
    and V; the head from ``embed_out`` or ``lm_head``."""
    prefix = "gpt_neox." if any(k.startswith("gpt_neox.") for k in state) else ""
    names = {"embedding.weight": f"{prefix}embed_in.weight", "final_norm.weight": f"{prefix}final_layer_norm.weight",
             "final_norm.bias": f"{prefix}final_layer_norm.bias"}
    head = "embed_out.weight" if "embed_out.weight" in state else "lm_head.weight"
    if not cfg.tied_head:
        names["lm_head.weight"] = head
    for i in range(cfg.decoder_layers):
        for theirs, ours in LAYER_PARTS.items():
            for kind in ("weight", "bias"):
                if kind == "weight" or cfg.attention_bias or not theirs.startswith("attention."):
                    names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}layers.{i}.{theirs}.{kind}"
    ignored = {k for k in state if k.endswith((".attention.bias", ".attention.masked_bias"))}  # old mask buffers
    ignored |= {head} if cfg.tied_head else set()
    return per_head_qkv(placed(state, names, ignored, path), cfg)


FAMILY = Family("GPT-NeoX / Pythia", lm_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random GPT-NeoX models (parallel residual, partial rotary, fused per-head "
                "Q/K/V)", decoder_only=True)
