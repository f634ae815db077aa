"""ELECTRA's generator (``ElectraForMaskedLM``): BERT's embeddings in ``embedding_size``, normed, then
``embeddings_project`` to the hidden size where they differ; BERT's encoder; the head ``generator_predictions``
(dense to embedding_size, erf GELU whatever hidden_act says, LayerNorm) and ``generator_lm_head`` (tied to the word
embeddings, its own bias). The discriminator (``ElectraForPreTraining``) has no masked-LM head: refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .bert import bert_fields, encoder_names, head_names, mapped
from .common import Family
from .encoder_only import check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer

HEADS = ("ElectraForMaskedLM",)


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of an ELECTRA generator's config.json."""
    head = check_masked_lm(hf, path, HEADS)
    fields = bert_fields(hf, path)
    width = int(hf.get("embedding_size", fields["d_model"]))
    return encoder_config(hf, path, head, **fields, head_activation="gelu",
                          embedding_size=None if width == fields["d_model"] else width)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of ELECTRA's tensors."""
    head = head_names("generator_predictions.dense", "generator_predictions.LayerNorm", "generator_lm_head.bias")
    names = {**encoder_names(cfg, "electra."), **head}
    if cfg.embedding_size is not None:
        names.update({"projection.weight": "electra.embeddings_project.weight",
                      "projection.bias": "electra.embeddings_project.bias"})
    return mapped(state, names, "generator_lm_head.weight", path, head=cfg.masked_lm_head)


FAMILY = Family("ELECTRA (generator)", encoder_tokenizer, model_config, map_weights, conversion_lines,
                lambda *_: None, "tokenizer.json", "small random ELECTRA generators", encoder_only=True)
