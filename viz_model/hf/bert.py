"""BERT (``BertForMaskedLM``; ``BertForPreTraining``'s folders too, their next-sentence head and pooler left out):
word, learned position and token-type embeddings normed, post-norm layers, the masked-LM head (dense, hidden_act,
LayerNorm, the output projection tied to the word embeddings with ``cls.predictions.bias``). RoBERTa and ELECTRA
store their encoder the same way (`encoder_names`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .common import Family, need
from .decoder_only import placed
from .encoder_only import activation, check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer, head_tied

HEADS = ("BertForMaskedLM", "BertForPreTraining")
LAYER_PARTS = {"attention.self.query": "self_attn.w_q", "attention.self.key": "self_attn.w_k",
               "attention.self.value": "self_attn.w_v", "attention.output.dense": "self_attn.w_o",
               "attention.output.LayerNorm": "attn_residual.norm", "intermediate.dense": "ffn.w_1",
               "output.dense": "ffn.w_2", "output.LayerNorm": "ffn_residual.norm"}


def bert_fields(hf: dict[str, Any], path: Path) -> dict[str, Any]:
    """The `ModelConfig` fields of a BERT-layout config.json (BERT, RoBERTa, ELECTRA)."""
    return {"encoder_layers": int(need(hf, "num_hidden_layers", path)), "d_model": int(need(hf, "hidden_size", path)),
            "heads": int(need(hf, "num_attention_heads", path)), "d_ff": int(need(hf, "intermediate_size", path)),
            "max_positions": int(need(hf, "max_position_embeddings", path)),
            "type_vocab_size": int(hf.get("type_vocab_size", 2)), "norm_eps": float(hf.get("layer_norm_eps", 1e-12)),
            "activation": activation(hf, "hidden_act", path)}


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a BERT config.json."""
    head = check_masked_lm(hf, path, HEADS)
    fields = bert_fields(hf, path)
    return encoder_config(hf, path, head, **fields, head_activation=fields["activation"])


def encoder_names(cfg: ModelConfig, prefix: str) -> dict[str, str]:
    """Our names of a BERT-layout encoder's tensors (under `prefix`: ``bert.``, ``roberta.``, ``electra.``) with
    theirs: embeddings, their norm and every layer."""
    names = {"embedding.weight": f"{prefix}embeddings.word_embeddings.weight",
             "positions.weight": f"{prefix}embeddings.position_embeddings.weight"}
    if cfg.type_vocab_size:
        names["token_types.weight"] = f"{prefix}embeddings.token_type_embeddings.weight"
    for kind in ("weight", "bias"):
        names[f"embedding_norm.{kind}"] = f"{prefix}embeddings.LayerNorm.{kind}"
        for i in range(cfg.encoder_layers):
            for theirs, ours in LAYER_PARTS.items():
                names[f"layers.{i}.{ours}.{kind}"] = f"{prefix}encoder.layer.{i}.{theirs}.{kind}"
    return names


def head_names(dense: str, norm: str, bias: str) -> dict[str, str]:
    """Our names of the masked-LM head's tensors with theirs: the transform's dense and norm, the output bias."""
    return {"head_dense.weight": f"{dense}.weight", "head_dense.bias": f"{dense}.bias",
            "head_norm.weight": f"{norm}.weight", "head_norm.bias": f"{norm}.bias", "head_bias": bias}


def mapped(state: dict[str, Tensor], names: dict[str, str], output: str, path: Path,
           unused: tuple[str, ...] = (), head: bool = True) -> dict[str, Tensor]:
    """Our state dict of `names`: the output projection's stored matrix `output` checked tied (and its stored bias,
    the head's own), tensors starting with `unused` (a pooler, a next-sentence head) left out; anything else
    unplaced is refused in one line. Without the masked-LM `head` (a classifier's folder): the encoder's tensors
    alone, whatever the folder keeps beside them (its head, a classifier) left out."""
    if not head:
        names = {ours: theirs for ours, theirs in names.items() if not ours.startswith("head_")}
        encoder = names["embedding.weight"].split(".", 1)[0] + "."
        return placed(state, names, {k for k in state if not k.startswith(encoder) or k.startswith(unused)
                                     or k.endswith(("position_ids", "token_type_ids"))}, path)
    ignored = head_tied(state, output, names["embedding.weight"], path)
    ignored |= {k for k in state if k.startswith(unused) or k == output.replace(".weight", ".bias")
                or k.endswith(("position_ids", "token_type_ids"))}
    return placed(state, names, ignored, path)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of BERT's tensors."""
    names = {**encoder_names(cfg, "bert."), **head_names("cls.predictions.transform.dense",
                                                         "cls.predictions.transform.LayerNorm",
                                                         "cls.predictions.bias")}
    return mapped(state, names, "cls.predictions.decoder.weight", path, ("bert.pooler.", "cls.seq_relationship."),
                  cfg.masked_lm_head)


FAMILY = Family("BERT", encoder_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                "tokenizer.json", "small random BERT models", encoder_only=True)
