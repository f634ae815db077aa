"""GPT-2: learned positions, LayerNorm pre-norm with a final norm, GELU (tanh) MLP, biases everywhere, the head tied to
the embeddings. Its ``Conv1D`` weights are stored ``(in, out)`` (transposed here) and ``c_attn`` holds Q, K and V
side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ..config import ModelConfig
from .common import Family, HFImportError, need
from .decoder_only import conversion_lines, decoder_config, end_ids, lm_tokenizer, placed

ACTIVATIONS = {"gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
REFUSED = ("scale_attn_by_inverse_layer_idx", "add_cross_attention")
LAYER_PARTS = {"ln_1": "attn_residual.norm", "ln_2": "ffn_residual.norm", "attn.c_proj": "self_attn.w_o",
               "mlp.c_fc": "ffn.w_1", "mlp.c_proj": "ffn.w_2"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a GPT-2 config.json."""
    for key in REFUSED:
        if hf.get(key):
            raise HFImportError(f"{path}: {key} = true is not implemented")
    if not hf.get("scale_attn_weights", True):
        raise HFImportError(f"{path}: scale_attn_weights = false is not implemented (scores are divided by "
                            "sqrt(head width))")
    act = hf.get("activation_function", "gelu_new")
    if act not in ACTIVATIONS:
        raise HFImportError(f"{path}: activation_function {act!r} is not implemented ({', '.join(ACTIVATIONS)} are)")
    d_model = int(need(hf, "n_embd", path))
    return decoder_config(hf, path, end_ids(path.parent, hf), decoder_layers=int(need(hf, "n_layer", path)),
                          d_model=d_model, heads=int(need(hf, "n_head", path)),
                          d_ff=int(hf.get("n_inner") or 4 * d_model),
                          max_positions=int(need(hf, "n_positions", path)), positional="learned",
                          norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)), activation=ACTIVATIONS[act],
                          tied_head=bool(hf.get("tie_word_embeddings", True)))


def gpt_names(state: dict[str, Tensor], cfg: ModelConfig, parts: dict[str, str],
              unbiased: tuple[str, ...] = ()) -> tuple[dict[str, str], set[str]]:
    """Our names of a GPT-2-shaped checkpoint's tensors (GPT-2, GPT-Neo; ``transformer.`` prefix or none): the
    embeddings, positions, final norm, the head where it is untied and each layer's `parts` (their name: ours; no bias
    for those ending in one of `unbiased`); and the tensors left unplaced (old mask buffers, a tied head's copy)."""
    prefix = "transformer." if any(k.startswith("transformer.") for k in state) else ""
    names = {"embedding.weight": f"{prefix}wte.weight", "positions.embedding.weight": f"{prefix}wpe.weight",
             "final_norm.weight": f"{prefix}ln_f.weight", "final_norm.bias": f"{prefix}ln_f.bias"}
    if not cfg.tied_head:
        names["lm_head.weight"] = "lm_head.weight"
    for i in range(cfg.decoder_layers):
        for theirs, ours in parts.items():
            for kind in ("weight",) if theirs.endswith(unbiased) else ("weight", "bias"):
                names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}h.{i}.{theirs}.{kind}"
    ignored = {k for k in state if k.endswith((".attn.bias", ".attn.masked_bias", ".attention.bias",
                                               ".attention.masked_bias"))}
    return names, ignored | ({"lm_head.weight"} if cfg.tied_head else set())


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of GPT-2's tensors (``transformer.`` prefix or none): Conv1D weights transposed, c_attn split
    into Q, K and V."""
    flat = placed(state, *gpt_names(state, cfg, {**LAYER_PARTS, "attn.c_attn": "self_attn.w_qkv"}), path)
    mapped: dict[str, Tensor] = {}
    for name, tensor in flat.items():
        conv = ".self_attn." in name or ".ffn." in name
        tensor = tensor.t().contiguous() if conv and name.endswith("weight") else tensor
        if ".w_qkv." in name:
            for part, piece in zip(("w_q", "w_k", "w_v"), torch.split(tensor, cfg.d_model, dim=0)):
                mapped[name.replace("w_qkv", part)] = piece.contiguous()
        else:
            mapped[name] = tensor
    return mapped


FAMILY = Family("GPT-2", lm_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random GPT-2 models", decoder_only=True)
