"""DeBERTa-v2 and v3 (``DebertaV2ForMaskedLM``): word (+ learned positions where position_biased_input, + token
types where type_vocab_size) embeddings, ``embed_proj`` to the hidden size where embedding_size differs, then their
LayerNorm; BERT's post-norm layers whose self-attention is disentangled (`viz_model.nn.disentangled`: the content
term and pos_att_type's c2p and p2c, over log-bucketed relative positions, the relative embeddings projected by the
layer's own query and key projections with share_att_key, else by pos_query_proj / pos_key_proj); the masked-LM head
as transformers computes it: ``cls.predictions`` (legacy, dense to embedding_size) or ``lm_predictions.lm_head``
(legacy false; where config.json names no legacy, as the hub's DeBERTa-v3 configs, the one the checkpoint has), each
dense, hidden_act, LayerNorm, the word embeddings' transpose and a bias. transformers runs no
enhanced-mask-decoder layers (its z_steps is 0): neither does this import. With conv_kernel_size, the convolution
over the embeddings is added after the first layer (`viz_model.nn.deberta_conv`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .bert import head_names, mapped
from .common import Family, HFImportError, need
from .encoder_only import activation, check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer

HEADS = ("DebertaV2ForMaskedLM",)
LAYER_PARTS = {"attention.self.query_proj": "self_attn.w_q", "attention.self.key_proj": "self_attn.w_k",
               "attention.self.value_proj": "self_attn.w_v", "attention.self.pos_key_proj": "self_attn.pos_key",
               "attention.self.pos_query_proj": "self_attn.pos_query", "attention.output.dense": "self_attn.w_o",
               "attention.output.LayerNorm": "attn_residual.norm", "intermediate.dense": "ffn.w_1",
               "output.dense": "ffn.w_2", "output.LayerNorm": "ffn_residual.norm"}


def position_terms(hf: dict[str, Any]) -> tuple[str, ...]:
    """pos_att_type as a tuple (a list, or the older "p2c|c2p" string)."""
    terms = hf.get("pos_att_type") or []
    terms = [t.strip() for t in terms.lower().split("|")] if isinstance(terms, str) else list(terms)
    return tuple(t for t in ("c2p", "p2c") if t in terms) + tuple(t for t in terms if t not in ("c2p", "p2c"))


def conv_activation(hf: dict[str, Any], path: Path) -> str:
    """The convolution's activation (conv_act, default tanh)."""
    return "tanh" if hf.get("conv_act", "tanh") == "tanh" else activation(hf, "conv_act", path)


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a DeBERTa-v2 / v3 config.json."""
    head = check_masked_lm(hf, path, HEADS)
    if not hf.get("relative_attention", False):
        raise HFImportError(f"{path}: DeBERTa without relative_attention is not implemented (DeBERTa-v2 / v3 with "
                            "its disentangled attention are)")
    conv = int(hf.get("conv_kernel_size", 0))
    if conv > 0 and conv % 2 == 0:
        raise HFImportError(f"{path}: conv_kernel_size {conv}: an even kernel changes the length in transformers' "
                            "convolution (odd ones are implemented)")
    width, positions = int(need(hf, "hidden_size", path)), int(need(hf, "max_position_embeddings", path))
    embedding = int(hf.get("embedding_size", width))
    heads = int(need(hf, "num_attention_heads", path))
    head_width = int(hf.get("attention_head_size", width // heads))
    act = activation(hf, "hidden_act", path)
    maximum = int(hf.get("max_relative_positions", -1))
    return encoder_config(hf, path, head, encoder_layers=int(need(hf, "num_hidden_layers", path)), d_model=width,
                          heads=heads, d_ff=int(need(hf, "intermediate_size", path)), max_positions=positions,
                          d_kv=None if head_width * heads == width else head_width,
                          type_vocab_size=int(hf.get("type_vocab_size", 0)),
                          norm_eps=float(hf.get("layer_norm_eps", 1e-7)), activation=act, head_activation=act,
                          embedding_size=None if embedding == width else embedding,
                          project_before_norm=embedding != width, positional="disentangled",
                          position_biased_input=bool(hf.get("position_biased_input", True)),
                          position_buckets=max(int(hf.get("position_buckets", -1)), 0),
                          max_relative_positions=maximum if maximum >= 1 else positions,
                          share_att_key=bool(hf.get("share_att_key", False)), pos_att_type=position_terms(hf),
                          relative_norm="layer_norm" in str(hf.get("norm_rel_ebd", "none")).lower(),
                          conv_kernel_size=max(conv, 0), conv_groups=int(hf.get("conv_groups", 1)),
                          conv_activation=conv_activation(hf, path) if conv > 0 else "tanh")


HEAD_PARTS = {True: ("cls.predictions.", "transform.dense", "transform.LayerNorm"),  # legacy
              False: ("lm_predictions.lm_head.", "dense", "LayerNorm")}


def head_of(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> tuple[dict[str, str], str]:
    """The masked-LM head transformers reads, by config.json's legacy (beside the weights `path`): its names and its
    stored output matrix. Where config.json names no legacy (the hub's DeBERTa-v3 configs), the head the checkpoint
    has: transformers' legacy one where it is there (transformers reads it), else ``lm_predictions.lm_head``, as
    transformers computes it with legacy false (with legacy true it would draw the legacy head at random). One line
    where the checkpoint lacks the head legacy names, or has neither."""
    given = json.loads((path.parent / "config.json").read_text(encoding="utf-8")).get("legacy")
    has = {legacy: any(k.startswith(parts[0]) for k in state) for legacy, parts in HEAD_PARTS.items()}
    legacy = bool(given) if given is not None else has[True] or not has[False]
    prefix, dense, norm = HEAD_PARTS[legacy]
    if not has[legacy]:
        raise HFImportError(f"{path}: legacy {str(legacy).lower()} in config.json reads the head {prefix[:-1]}, which "
                            "this checkpoint lacks (transformers would draw it at random): set legacy "
                            f"{str(not legacy).lower()} to read the head it has")
    if not legacy and cfg.embedding_size is not None:
        raise HFImportError(f"{path}: legacy false with embedding_size {cfg.embedding_size} != hidden_size "
                            f"{cfg.d_model}: transformers' head {prefix[:-1]} cannot compute it")
    return head_names(prefix + dense, prefix + norm, prefix + "bias"), f"{prefix}decoder.weight"


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of DeBERTa's tensors."""
    prefix = "deberta."
    head, output = head_of(state, cfg, path) if cfg.masked_lm_head else ({}, "")
    names = {"embedding.weight": f"{prefix}embeddings.word_embeddings.weight",
             "relative.embedding.weight": f"{prefix}encoder.rel_embeddings.weight", **head}
    if cfg.position_biased_input:
        names["positions.weight"] = f"{prefix}embeddings.position_embeddings.weight"
    if cfg.type_vocab_size:
        names["token_types.weight"] = f"{prefix}embeddings.token_type_embeddings.weight"
    if cfg.embedding_size is not None:
        names["projection.weight"] = f"{prefix}embeddings.embed_proj.weight"
    separate = {"c2p": "pos_key_proj", "p2c": "pos_query_proj"}
    present = set() if cfg.share_att_key else {separate[term] for term in cfg.pos_att_type}
    for kind in ("weight", "bias"):
        names[f"embedding_norm.{kind}"] = f"{prefix}embeddings.LayerNorm.{kind}"
        if cfg.relative_norm:
            names[f"relative.norm.{kind}"] = f"{prefix}encoder.LayerNorm.{kind}"
        if cfg.conv_kernel_size:
            names[f"convolution.conv.{kind}"] = f"{prefix}encoder.conv.conv.{kind}"
            names[f"convolution.norm.{kind}"] = f"{prefix}encoder.conv.LayerNorm.{kind}"
        for i in range(cfg.encoder_layers):
            for theirs, ours in LAYER_PARTS.items():
                if "pos_" not in theirs or theirs.rsplit(".", 1)[-1] in present:
                    names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}encoder.layer.{i}.{theirs}.{kind}"
    unused = ("mask_predictions.",) + (() if cfg.position_biased_input else
                                       (f"{prefix}embeddings.position_embeddings.",))
    return mapped(state, names, output, path, unused, cfg.masked_lm_head)


FAMILY = Family("DeBERTa-v2 / v3", encoder_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random DeBERTa-v2 / v3 models (log buckets, shared and separate position "
                "projections, both heads)", encoder_only=True)
