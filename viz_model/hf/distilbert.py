"""DistilBERT (``DistilBertForMaskedLM``): word and learned position embeddings (no token types) normed, post-norm
layers (``q_lin`` .. ``out_lin``, ``sa_layer_norm``, ``ffn.lin1`` / ``lin2``, ``output_layer_norm``), every norm's
epsilon 1e-12 whatever the config says, and the head ``vocab_transform``, activation, ``vocab_layer_norm``,
``vocab_projector`` (tied to the word embeddings, its own bias). A sinusoidal table is read as stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .bert import head_names, mapped
from .common import Family, need
from .encoder_only import activation, check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer

HEADS = ("DistilBertForMaskedLM",)
EPS = 1e-12  # transformers' DistilBERT builds every LayerNorm with it
LAYER_PARTS = {"attention.q_lin": "self_attn.w_q", "attention.k_lin": "self_attn.w_k",
               "attention.v_lin": "self_attn.w_v", "attention.out_lin": "self_attn.w_o",
               "sa_layer_norm": "attn_residual.norm", "ffn.lin1": "ffn.w_1", "ffn.lin2": "ffn.w_2",
               "output_layer_norm": "ffn_residual.norm"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a DistilBERT config.json."""
    head = check_masked_lm(hf, path, HEADS)
    act = activation(hf, "activation", path)
    return encoder_config(hf, path, head, encoder_layers=int(need(hf, "n_layers", path)),
                          d_model=int(need(hf, "dim", path)), heads=int(need(hf, "n_heads", path)),
                          d_ff=int(need(hf, "hidden_dim", path)),
                          max_positions=int(need(hf, "max_position_embeddings", path)), norm_eps=EPS, activation=act,
                          head_activation=act)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of DistilBERT's tensors."""
    prefix = "distilbert."
    names = {"embedding.weight": f"{prefix}embeddings.word_embeddings.weight",
             "positions.weight": f"{prefix}embeddings.position_embeddings.weight",
             **head_names("vocab_transform", "vocab_layer_norm", "vocab_projector.bias")}
    for kind in ("weight", "bias"):
        names[f"embedding_norm.{kind}"] = f"{prefix}embeddings.LayerNorm.{kind}"
        for i in range(cfg.encoder_layers):
            for theirs, ours in LAYER_PARTS.items():
                names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}transformer.layer.{i}.{theirs}.{kind}"
    return mapped(state, names, "vocab_projector.weight", path, head=cfg.masked_lm_head)


FAMILY = Family("DistilBERT", encoder_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random DistilBERT models", encoder_only=True)
