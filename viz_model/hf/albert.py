"""ALBERT (``AlbertForMaskedLM``): BERT's embeddings in ``embedding_size``, normed, then
``embedding_hidden_mapping_in`` to the hidden size; ``num_hidden_groups`` stored layers that the
``num_hidden_layers`` depths share (the same weights give other maps at each depth), each a post-norm layer
(``attention.dense`` and ``attention.LayerNorm``, ``ffn``, ``ffn_output``, ``full_layer_layer_norm``); the head
``predictions`` (dense to embedding_size, hidden_act, LayerNorm, the decoder tied to the word embeddings with
``predictions.bias``). ``inner_group_num`` above 1 is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .bert import bert_fields, head_names, mapped
from .common import Family, HFImportError
from .encoder_only import check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer

HEADS = ("AlbertForMaskedLM", "AlbertForPreTraining")
LAYER_PARTS = {"attention.query": "self_attn.w_q", "attention.key": "self_attn.w_k",
               "attention.value": "self_attn.w_v", "attention.dense": "self_attn.w_o",
               "attention.LayerNorm": "attn_residual.norm", "ffn": "ffn.w_1", "ffn_output": "ffn.w_2",
               "full_layer_layer_norm": "ffn_residual.norm"}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of an ALBERT config.json."""
    head = check_masked_lm(hf, path, HEADS)
    if int(hf.get("inner_group_num", 1)) != 1:
        raise HFImportError(f"{path}: inner_group_num {hf['inner_group_num']} is not implemented (1 is)")
    fields = bert_fields({"hidden_act": "gelu_new", **hf}, path)  # ALBERT's default activation
    groups = int(hf.get("num_hidden_groups", 1))
    return encoder_config(hf, path, head, **fields, head_activation=fields["activation"],
                          embedding_size=int(hf.get("embedding_size", 128)),  # always projected, even to its own width
                          shared_layers=None if groups == fields["encoder_layers"] else groups)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of ALBERT's tensors."""
    prefix = "albert."
    names = {"embedding.weight": f"{prefix}embeddings.word_embeddings.weight",
             "positions.weight": f"{prefix}embeddings.position_embeddings.weight",
             "token_types.weight": f"{prefix}embeddings.token_type_embeddings.weight",
             **head_names("predictions.dense", "predictions.LayerNorm", "predictions.bias")}
    stored = cfg.shared_layers or cfg.encoder_layers
    for kind in ("weight", "bias"):
        names[f"embedding_norm.{kind}"] = f"{prefix}embeddings.LayerNorm.{kind}"
        names[f"projection.{kind}"] = f"{prefix}encoder.embedding_hidden_mapping_in.{kind}"
        for i in range(stored):
            for theirs, ours in LAYER_PARTS.items():
                group = f"{prefix}encoder.albert_layer_groups.{i}.albert_layers.0"
                names[f"layers.{i}.{ours}.{kind}"] = f"{group}.{theirs}.{kind}"
    return mapped(state, names, "predictions.decoder.weight", path, (f"{prefix}pooler.", "sop_classifier."),
                  cfg.masked_lm_head)


FAMILY = Family("ALBERT", encoder_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random ALBERT models (one layer's weights shared by three depths)",
                encoder_only=True)
