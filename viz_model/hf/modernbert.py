"""ModernBERT (``ModernBertForMaskedLM``): token embeddings normed (no positions, no token types); pre-norm layers,
the first without its attention norm, ``Wqkv`` holding Q, K and V one after the other, RoPE with ``global_rope_theta``
in the layers that see every key and ``local_rope_theta`` in the local ones (every global_attn_every_n_layers-th layer
is global), which see the keys within ``local_attention // 2`` on either side; a GeGLU MLP (``Wi``: the activated half
first, then the gate; ``Wo``); a final norm; the head (dense, classifier_activation, norm, the decoder tied to the
token embeddings with its own bias). The norms, attention and MLP have biases only where norm_bias, attention_bias,
mlp_bias say (a missing bias is zero)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..config import ModelConfig
from .bert import head_names, mapped
from .common import Family, HFImportError, need
from .encoder_only import activation, check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer

HEADS = ("ModernBertForMaskedLM",)
DEFAULT_THETA = {"full_attention": 160_000.0, "sliding_attention": 10_000.0}
THETA_KEYS = {"full_attention": "global_rope_theta", "sliding_attention": "local_rope_theta"}
LAYER_TYPES = ("full_attention", "sliding_attention")


def layer_types(hf: dict[str, Any], path: Path, layers: int) -> list[str]:
    """Each layer's type as transformers reads it: ``layer_types``, else every global_attn_every_n_layers-th layer
    full, the others sliding."""
    types = hf.get("layer_types")
    if types is None:
        every = int(hf.get("global_attn_every_n_layers", 3))
        types = ["sliding_attention" if i % every else "full_attention" for i in range(layers)]
    if len(types) != layers or any(t not in LAYER_TYPES for t in types):
        raise HFImportError(f"{path}: layer_types must give each of the {layers} layers one of "
                            f"{', '.join(LAYER_TYPES)}")
    return list(types)


def rope_theta(hf: dict[str, Any], path: Path, kind: str) -> float:
    """The RoPE base of the layers of `kind`; one line for a rope_type other than "default"."""
    settings = (hf.get("rope_parameters") or {}).get(kind) or {}
    rope_type = settings.get("rope_type", (hf.get("rope_scaling") or {}).get("rope_type", "default"))
    if rope_type != "default":
        raise HFImportError(f"{path}: rope_type {rope_type!r} is not implemented for ModernBERT (default is)")
    return float(settings.get("rope_theta", hf.get(THETA_KEYS[kind], DEFAULT_THETA[kind])))


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a ModernBERT config.json."""
    head = check_masked_lm(hf, path, HEADS)
    layers, width = int(need(hf, "num_hidden_layers", path)), int(need(hf, "hidden_size", path))
    types = layer_types(hf, path, layers)
    window = int(hf.get("local_attention", 128)) // 2
    return encoder_config(hf, path, head, encoder_layers=layers, d_model=width,
                          heads=int(need(hf, "num_attention_heads", path)),
                          d_ff=int(need(hf, "intermediate_size", path)),
                          max_positions=int(hf.get("max_position_embeddings", 8192)),
                          norm_eps=float(hf.get("norm_eps", 1e-5)), norm="pre", positional="rope",
                          activation=activation(hf, "hidden_activation", path),
                          head_activation=activation(hf, "classifier_activation", path),
                          attention_bias=bool(hf.get("attention_bias", False)),
                          ffn_bias=bool(hf.get("mlp_bias", False)), gated_ffn=True,
                          rope_base=rope_theta(hf, path, "full_attention"),
                          windowed_rope_base=rope_theta(hf, path, "sliding_attention"),
                          window_radius=window if "sliding_attention" in types else None,
                          windowed_layers=tuple(i for i, t in enumerate(types) if t == "sliding_attention"),
                          first_attn_norm=False)


def or_zeros(state: dict[str, Tensor], name: str, size: int) -> Tensor:
    """The checkpoint's tensor `name`, or zeros of `size` where the config leaves that bias out."""
    return state[name] if name in state else torch.zeros(size, dtype=next(iter(state.values())).dtype)


def has_bias(cfg: ModelConfig, ours: str) -> bool:
    """Whether our tensor `ours` exists: a projection's bias only where the config gives its layer one (the norms and
    the head's dense always have one, zero where ModernBERT has none)."""
    if ours.endswith("self_attn.w_q.bias") or ours.endswith(("w_k.bias", "w_v.bias", "w_o.bias")):
        return cfg.attention_bias
    return cfg.ffn_bias if ours.endswith(("w_1.bias", "w_2.bias", "w_3.bias")) else True


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of ModernBERT's tensors: Wqkv and Wi split, every missing bias zero."""
    state = dict(state)
    d, ff, prefix = cfg.d_model, cfg.d_ff, "model."
    names = {"embedding.weight": f"{prefix}embeddings.tok_embeddings.weight",
             **head_names("head.dense", "head.norm", "decoder.bias")}
    norms = {"embedding_norm": f"{prefix}embeddings.norm", "final_norm": f"{prefix}final_norm",
             "head_norm": "head.norm"}
    parts = {"head_dense.bias": ("head.dense.bias", d), "head_bias": ("decoder.bias", cfg.vocab_size)}
    for i in range(cfg.encoder_layers):
        layer, ours = f"{prefix}layers.{i}.", f"layers.{i}."
        for j, part in enumerate(("w_q", "w_k", "w_v")):
            for kind in ("weight", "bias"):
                key = f"{layer}attn.Wqkv.{kind}"
                if key in state:
                    state[f"{layer}attn.{part}.{kind}"] = state[key][j * d:(j + 1) * d]
                names[f"{ours}self_attn.{part}.{kind}"] = f"{layer}attn.{part}.{kind}"
                parts[f"{ours}self_attn.{part}.bias"] = (f"{layer}attn.{part}.bias", d)
        for kind in ("weight", "bias"):
            key = f"{layer}mlp.Wi.{kind}"
            if key in state:
                state[f"{layer}mlp.Wi.in.{kind}"], state[f"{layer}mlp.Wi.gate.{kind}"] = state[key].split(ff)
            names.update({f"{ours}ffn.w_1.{kind}": f"{layer}mlp.Wi.in.{kind}",
                          f"{ours}ffn.w_3.{kind}": f"{layer}mlp.Wi.gate.{kind}",
                          f"{ours}self_attn.w_o.{kind}": f"{layer}attn.Wo.{kind}",
                          f"{ours}ffn.w_2.{kind}": f"{layer}mlp.Wo.{kind}"})
        parts.update({f"{ours}ffn.w_1.bias": (f"{layer}mlp.Wi.in.bias", ff),
                      f"{ours}ffn.w_3.bias": (f"{layer}mlp.Wi.gate.bias", ff),
                      f"{ours}self_attn.w_o.bias": (f"{layer}attn.Wo.bias", d),
                      f"{ours}ffn.w_2.bias": (f"{layer}mlp.Wo.bias", d)})
        norms[f"{ours}ffn_residual.norm"] = f"{layer}mlp_norm"
        if i:
            norms[f"{ours}attn_residual.norm"] = f"{layer}attn_norm"
    for ours, theirs in norms.items():
        names[f"{ours}.weight"], names[f"{ours}.bias"] = f"{theirs}.weight", f"{theirs}.bias"
        parts[f"{ours}.bias"] = (f"{theirs}.bias", d)
    names = {ours: theirs for ours, theirs in names.items() if has_bias(cfg, ours)}
    for ours, (theirs, size) in parts.items():
        if ours in names:
            state[theirs] = or_zeros(state, theirs, size)
    split = {k for k in state if k.endswith(("attn.Wqkv.weight", "attn.Wqkv.bias", "mlp.Wi.weight", "mlp.Wi.bias"))}
    return mapped({k: v for k, v in state.items() if k not in split}, names, "decoder.weight", path,
                  head=cfg.masked_lm_head)


FAMILY = Family("ModernBERT", encoder_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random ModernBERT models (global and local layers, two RoPE bases)",
                encoder_only=True)
