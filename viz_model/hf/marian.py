"""Marian (opus-mt): the paper's architecture with four differences that `ModelConfig` names: sinusoids in two
halves (``sinusoid_layout="halves"``), a SiLU feed-forward (``activation``), a bias on the output logits
(``output_bias``), and decoding that starts from the pad id, which it never outputs (``bos_id``,
``never_emitted``). Its tokenizer is `MarianTokenizer`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from ..modeldir.languages import LanguagePair, guess_languages
from ..tokenization.imported import PretrainedTokenizer
from ..tokenization.pretrained import MarianTokenizer
from ..tokenization.tokenizer import TokenizerError
from .arguments import argument
from .common import MAX_HF_CONFIG_BYTES, Family, HFImportError, need
from .fairseq import checked_activation, fairseq_config, map_weights

CHECKS = {"scale_embedding": True, "share_encoder_decoder_embeddings": True, "normalize_before": False,
          "add_final_layer_norm": False, "normalize_embedding": False, "static_position_embeddings": True}


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for a Marian config, refusing what the instrumented model does not implement."""
    activation = checked_activation(hf, path, CHECKS)
    pad = need(hf, "pad_token_id", path)
    start = hf.get("decoder_start_token_id")
    return fairseq_config(hf, path, unk_id, activation, norm="post", sinusoid_layout="halves", output_bias=True,
                          bos_id=pad if start is None else start, never_emitted=(pad,))


def tokenizer(folder: Path, hf: dict[str, Any], source_lang: str | None, target_lang: str | None) -> MarianTokenizer:
    """The folder's `MarianTokenizer` (a Marian model translates one fixed pair)."""
    if source_lang or target_lang:
        raise HFImportError(f"{argument('source_lang')} / {argument('target_lang')} choose the pair of a many-to-many "
                            "model (M2M100, mBART) or the task of a T5; a Marian model translates one fixed pair")
    try:
        return MarianTokenizer.load(folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None


def folder_languages(source: str, folder: Path, tokenizer: PretrainedTokenizer | None = None) -> LanguagePair | None:
    """The language pair from tokenizer_config.json (source_lang / target_lang), else from an opus-mt name."""
    path = folder / "tokenizer_config.json"
    if path.is_file() and path.stat().st_size < MAX_HF_CONFIG_BYTES:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("source_lang") and data.get("target_lang"):
                pair = LanguagePair(str(data["source_lang"]), str(data["target_lang"]))
                if all(re.fullmatch(r"[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{2,8})?", c) for c in (pair.source, pair.target)):
                    return pair
        except ValueError:
            pass
    return guess_languages(source, folder.name)


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How a Marian checkpoint maps onto the instrumented model, for its card."""
    return [f"- Post-norm, embeddings tied and scaled by sqrt(d_model); sinusoids in halves; {cfg.activation} FFN; "
            "final_logits_bias as the output bias; decoding starts from the pad id, which is never emitted.",
            "- Tokenizer: source.spm, target.spm and vocab.json copied as they are."]


FAMILY = Family("Marian / opus-mt", tokenizer, model_config, map_weights, conversion_lines, folder_languages,
                "vocab.json", "small random Marian, M2M100 and NLLB models (Marian also with two published opus-mt "
                "tokenizers and configs)")
