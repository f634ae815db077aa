"""RoBERTa and XLM-RoBERTa (``RobertaForMaskedLM``, ``XLMRobertaForMaskedLM``): BERT's encoder, positions counted
from the pad id (the first token reads row pad_id + 1, a pad row pad_id), one token type, and ``lm_head`` (dense,
erf GELU whatever hidden_act says, layer_norm, the output projection tied to the word embeddings with its own
bias)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import Tensor

from ..config import ModelConfig
from .bert import bert_fields, encoder_names, head_names, mapped
from .common import Family
from .encoder_only import check_masked_lm, conversion_lines, encoder_config, encoder_tokenizer

HEADS = ("RobertaForMaskedLM", "XLMRobertaForMaskedLM")


def model_config(hf: dict[str, Any], path: Path, unk_id: int = 0, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` of a RoBERTa or XLM-R config.json."""
    head = check_masked_lm(hf, path, HEADS)
    fields = bert_fields(hf, path)
    return encoder_config(hf, path, head, **{**fields, "type_vocab_size": int(hf.get("type_vocab_size", 1))},
                          head_activation="gelu", pad_positions=True)


def map_weights(state: dict[str, Tensor], cfg: ModelConfig, path: Path) -> dict[str, Tensor]:
    """Our state dict of RoBERTa's tensors."""
    names = {**encoder_names(cfg, "roberta."), **head_names("lm_head.dense", "lm_head.layer_norm", "lm_head.bias")}
    return mapped(state, names, "lm_head.decoder.weight", path, ("roberta.pooler.",), cfg.masked_lm_head)


ROBERTA = Family("RoBERTa", encoder_tokenizer, model_config, map_weights, conversion_lines, lambda *_: None,
                 "tokenizer.json", "small random RoBERTa models", encoder_only=True)
XLM_ROBERTA = Family("XLM-RoBERTa", encoder_tokenizer, model_config, map_weights, conversion_lines,
                     lambda *_: None, "tokenizer.json", "small random XLM-RoBERTa models", encoder_only=True)
