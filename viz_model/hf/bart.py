"""BART, mBART-50 and the original mBART: learned positions read from row 2 of their tables (``positional="learned"``,
``position_offset``), a norm on the embeddings (``embedding_norm``), embeddings scaled where ``scale_embedding`` says
(mBART), post-norm (BART) or pre-norm with a final norm on each stack (mBART), GELU, a bias on the logits. BART and
mBART-50 decode from ``</s>``, BART's first output forced where its generation config forces one (``<s>``),
mBART-50's to the target language's code; the original mBART (mbart-large-cc25, mbart-large-en-ro) decodes from the
target language's code (``bos_id``). Tokenizers are read from tokenizer.json: BART ``<s> X </s>``, mBART-50
``[language code] X </s>``, the original mBART's MBartTokenizer ``X </s> [language code]`` (``code_after_eos``)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from ..modeldir.languages import LanguagePair
from ..tokenization.imported import PretrainedTokenizer
from ..tokenization.tokenizer_json import JsonTokenizer
from .arguments import argument
from .common import Family, HFImportError, added_codes, language_pair, tokenizer_settings
from .fairseq import checked_activation, fairseq_config, map_weights
from .json_tokenizer import checked_class, json_tokenizer, tokenizer_source
from .marian import folder_languages

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: row p + 2 for position p
MBART50_CODE = re.compile(r"[a-z]{2}_[A-Z]{2}")  # en_XX, de_DE, ...
BART_TOKENIZERS = ("BartTokenizer", "BartTokenizerFast", "RobertaTokenizer", "RobertaTokenizerFast")
MBART50_TOKENIZERS = ("MBart50Tokenizer", "MBart50TokenizerFast")
# the original mBART's: the language codes after </s>; transformers' reading of an mBART folder that names none
ORIGINAL_MBART_TOKENIZERS = ("MBartTokenizer", "MBartTokenizerFast")
ORIGINAL_MBART_SOURCE = "en_XX"  # MBartTokenizer's source language where its settings name none


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for a BART or mBART config, refusing what the instrumented model does not implement; an mBART
    config without decoder_start_token_id (mbart-large-cc25's) starts from its bos_token_id, as generate falls back,
    until the import sets the start its tokenizer says."""
    activation = checked_activation(hf, path, {})
    start = hf.get("decoder_start_token_id", 2 if hf["model_type"] == "bart" else None)
    if start is None and hf["model_type"] == "bart":
        raise HFImportError(f"{path}: decoder_start_token_id null; BART decodes from </s>")
    return fairseq_config(hf, path, unk_id, activation, positional="learned", position_offset=POSITION_OFFSET,
                          embedding_norm=True, scale_embeddings=bool(hf.get("scale_embedding", False)),
                          norm="pre" if hf["model_type"] == "mbart" else "post", output_bias=True,
                          bos_id=hf.get("bos_token_id", 0) if start is None else start, forced_first_id=forced_first_id)


def tokenizer(folder: Path, hf: dict[str, Any], source: str | None, target: str | None) -> JsonTokenizer:
    """BART's tokenizer (a fixed pair), or an mBART's (`mbart_tokenizer`)."""
    if hf["model_type"] == "mbart":
        return mbart_tokenizer(folder, hf, source, target)
    if source or target:
        raise HFImportError(f"{argument('source_lang')} / {argument('target_lang')} choose the pair of a many-to-many "
                            "model (M2M100, mBART) or the task of a T5; a BART model translates one fixed pair")
    return json_tokenizer(folder, hf, checked_class(folder, BART_TOKENIZERS), hf.get("decoder_start_token_id", 2),
                          before=["<s>"])


def mbart_tokenizer(folder: Path, hf: dict[str, Any], source: str | None, target: str | None) -> JsonTokenizer:
    """An mBART's tokenizer for the language pair given, else the one its settings name: mBART-50's language codes
    before the text, the target's forced first; the original mBART's after </s>, the target's the decoder's start."""
    settings = tokenizer_settings(folder)
    name = mbart_class(folder, hf, settings)
    tokenizer_file = tokenizer_source(folder)
    codes = added_codes(json.loads(tokenizer_file), MBART50_CODE)
    if not codes:
        raise HFImportError(f"{folder / 'tokenizer.json'}: no language code (such as en_XX) among its added tokens")
    original = name in ORIGINAL_MBART_TOKENIZERS
    start = hf.get("decoder_start_token_id")
    if original:
        if start is not None and start not in codes.values():
            raise HFImportError(f"{folder / 'config.json'}: decoder_start_token_id {start} is not a language code, "
                                f"but the original mBART ({name}) decodes from the target language's code, as this "
                                "import does: generate would start otherwise")
        settings = original_pair_settings(start, settings, codes)
    elif start is None:
        raise HFImportError(f"{folder / 'config.json'}: no decoder_start_token_id; mBART-50 decodes from </s>")
    pair = language_pair(codes, source, target, settings, folder / "tokenizer_config.json")
    if original:
        start = codes[pair["target"]]
    return json_tokenizer(folder, hf, {**settings, "tokenizer_class": name}, start, tokenizer_file, codes=codes,
                          code_after_eos=original, **pair)


def mbart_class(folder: Path, hf: dict[str, Any], settings: dict[str, Any]) -> str:
    """The tokenizer class an mBART folder names (in tokenizer_config.json, else config.json, else transformers'
    reading: MBartTokenizer), after checking that it is one whose rules this import follows."""
    named_in = "tokenizer_config.json" if settings.get("tokenizer_class") or not hf.get("tokenizer_class") else \
        "config.json"  # the hub's mBART-50 configs name it there
    name = settings.get("tokenizer_class") or hf.get("tokenizer_class") or ORIGINAL_MBART_TOKENIZERS[0]
    known = MBART50_TOKENIZERS + ORIGINAL_MBART_TOKENIZERS
    if name not in known:
        raise HFImportError(f"{folder / named_in}: tokenizer_class {name!r} is not one this model family's import "
                            f"follows ({', '.join(known)})")
    return name


def original_pair_settings(start: int | None, settings: dict[str, Any], codes: dict[str, int]) -> dict[str, Any]:
    """The original mBART's tokenizer settings with the pair transformers translates where none is given: the source
    its settings name (else MBartTokenizer's en_XX), the target whose code config.json's decoder_start_token_id
    `start` is (generate's start), else the one its settings name."""
    started = next((code for code, i in codes.items() if i == start), None)
    return {**settings, "src_lang": settings.get("src_lang") or ORIGINAL_MBART_SOURCE,
            "tgt_lang": started or settings.get("tgt_lang")}


def languages(source: str, folder: Path, tokenizer: PretrainedTokenizer) -> LanguagePair | None:
    """An mBART's pair chosen at import; BART's from tokenizer_config.json or its name, where they say it."""
    assert isinstance(tokenizer, JsonTokenizer)
    if tokenizer.source_language and tokenizer.target_language:
        return LanguagePair(tokenizer.source_language, tokenizer.target_language)
    return folder_languages(source, folder)


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How a BART or mBART checkpoint maps onto the instrumented model, for its card."""
    norm = "pre-norm with a final layer norm on each stack" if cfg.norm == "pre" else "post-norm"
    forced = ("" if cfg.forced_first_id is None else
              f", the first output forced to id {cfg.forced_first_id}" + (" (the target language's code)"
                                                                          if cfg.norm == "pre" else ""))
    start = "</s>" if cfg.bos_id == cfg.eos_id else "the target language's code" \
        if cfg.norm == "pre" and cfg.forced_first_id is None else "the config's start"  # code: the original mBART's
    return [f"- {'mBART' if cfg.norm == 'pre' else 'BART'}: {norm}; embeddings tied"
            + (" and scaled by sqrt(d_model)" if cfg.scale_embeddings else ", not scaled")
            + f"; learned positions, position p at row p + {cfg.position_offset} of each table; a layer norm on the "
            f"embeddings (layernorm_embedding); {cfg.activation} FFN; final_logits_bias as the output bias; decoding "
            f"starts from {start} (id {cfg.bos_id}){forced}.",
            "- Tokenizer: tokenizer.json as transformers 5 builds it (where installed; else the folder's); "
            "tokenizer_rules.json holds what goes around the pieces "
            "(<s>, or the language codes, before the text or after </s>, and the pair chosen at import) and the "
            "model's id table."]


BART = Family("BART", tokenizer, model_config, map_weights, conversion_lines, languages, "tokenizer.json",
              "small random BART, mBART-50 and original mBART models (BART also with bart-large's published "
              "tokenizer and config)",
              forced_bos_from_generation=True)
MBART = dataclasses.replace(BART, label="mBART / mBART-50")
