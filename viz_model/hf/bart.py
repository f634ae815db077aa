"""BART and mBART-50: learned positions read from row 2 of their tables (``positional="learned"``,
``position_offset``), a norm on the embeddings (``embedding_norm``), embeddings scaled where ``scale_embedding`` says
(mBART), post-norm (BART) or pre-norm with a final norm on each stack (mBART), GELU, a bias on the logits, decoding
from ``</s>``; BART's first output forced where its generation config forces one (``<s>``), mBART-50's to the target
language's code. Tokenizers are read from tokenizer.json: BART ``<s> X </s>``, mBART-50 ``[language code] X </s>``.
The original mBART (MBartTokenizer: ``X </s> [language code]``, decoding from the target's code) is refused."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from ..modeldir.languages import LanguagePair
from ..tokenization.imported import PretrainedTokenizer
from ..tokenization.tokenizer_json import JsonTokenizer
from .common import Family, HFImportError, added_codes, language_pair, tokenizer_settings
from .fairseq import checked_activation, fairseq_config, map_weights
from .json_tokenizer import checked_class, json_tokenizer, tokenizer_json
from .marian import folder_languages

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: row p + 2 for position p
MBART50_CODE = re.compile(r"[a-z]{2}_[A-Z]{2}")  # en_XX, de_DE, ...
BART_TOKENIZERS = ("BartTokenizer", "BartTokenizerFast", "RobertaTokenizer", "RobertaTokenizerFast")
MBART50_TOKENIZERS = ("MBart50Tokenizer", "MBart50TokenizerFast")
ORIGINAL_MBART_TOKENIZERS = ("MBartTokenizer", "MBartTokenizerFast")  # transformers' reading where none is named


def refused_tokenizer(path: Path, name: str | None) -> HFImportError:
    """The one-line refusal of an mBART tokenizer that is not mBART-50's, `name` as `path` names it (None: none)."""
    if name is not None and name not in ORIGINAL_MBART_TOKENIZERS:
        return HFImportError(f"{path}: tokenizer_class {name!r} is not one this model family's import follows "
                             f"({', '.join(MBART50_TOKENIZERS)})")
    named = f"tokenizer_class {name!r} is" if name else "names no tokenizer_class (transformers reads MBartTokenizer),"
    return HFImportError(f"{path}: {named} the original mBART's (mbart-large-cc25, mbart-large-en-ro: the source's "
                         "language code after </s>, decoding from the target's code), which this project does not "
                         f"import; only mBART-50's ({MBART50_TOKENIZERS[0]}: the language code before the text) is "
                         "supported")


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for a BART or mBART config, refusing what the instrumented model does not implement."""
    activation = checked_activation(hf, path, {})
    if hf["model_type"] == "mbart" and hf.get("tokenizer_class") in ORIGINAL_MBART_TOKENIZERS:
        raise refused_tokenizer(path, hf["tokenizer_class"])
    start = hf.get("decoder_start_token_id", 2 if hf["model_type"] == "bart" else None)
    if start is None:
        raise HFImportError(f"{path}: no decoder_start_token_id (the original mBART starts from the target "
                            "language's code; only mBART-50's start from </s> is supported)")
    return fairseq_config(hf, path, unk_id, activation, positional="learned", position_offset=POSITION_OFFSET,
                          embedding_norm=True, scale_embeddings=bool(hf.get("scale_embedding", False)),
                          norm="pre" if hf["model_type"] == "mbart" else "post", output_bias=True, bos_id=start,
                          forced_first_id=forced_first_id)


def tokenizer(folder: Path, hf: dict[str, Any], source: str | None, target: str | None) -> JsonTokenizer:
    """BART's tokenizer (a fixed pair), or mBART-50's for the language pair given (else its tokenizer_config's)."""
    start = hf.get("decoder_start_token_id", 2)
    if hf["model_type"] == "bart":
        if source or target:
            raise HFImportError("--source-lang / --target-lang choose the pair of a many-to-many model (M2M100, "
                                "mBART-50); a BART model translates one fixed pair")
        return json_tokenizer(folder, hf, checked_class(folder, BART_TOKENIZERS), start, before=["<s>"])
    settings = tokenizer_settings(folder)
    named_in = "tokenizer_config.json" if settings.get("tokenizer_class") or not hf.get("tokenizer_class") else \
        "config.json"  # the hub's mBART-50 configs name it there
    name = settings.get("tokenizer_class") or hf.get("tokenizer_class")
    if name not in MBART50_TOKENIZERS:
        raise refused_tokenizer(folder / named_in, name)
    settings = {**settings, "tokenizer_class": name}
    codes = added_codes(tokenizer_json(folder), MBART50_CODE)
    if not codes:
        raise HFImportError(f"{folder / 'tokenizer.json'}: no language code (such as en_XX) among its added tokens")
    pair = language_pair(codes, source, target, settings, folder / "tokenizer_config.json")
    return json_tokenizer(folder, hf, settings, start, codes=codes, **pair)


def languages(source: str, folder: Path, tokenizer: PretrainedTokenizer) -> LanguagePair | None:
    """mBART-50's pair chosen at import; BART's from tokenizer_config.json or its name, where they say it."""
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
    return [f"- {'mBART' if cfg.norm == 'pre' else 'BART'}: {norm}; embeddings tied"
            + (" and scaled by sqrt(d_model)" if cfg.scale_embeddings else ", not scaled")
            + f"; learned positions, position p at row p + {cfg.position_offset} of each table; a layer norm on the "
            f"embeddings (layernorm_embedding); {cfg.activation} FFN; final_logits_bias as the output bias; decoding "
            f"starts from </s> (id {cfg.bos_id}){forced}.",
            "- Tokenizer: tokenizer.json copied as it is; tokenizer_rules.json holds what goes before the pieces "
            "(<s>, or the language codes and the pair chosen at import) and the model's id table."]


BART = Family("BART", tokenizer, model_config, map_weights, conversion_lines, languages, "tokenizer.json",
              "small random BART and mBART-50 models (BART also with bart-large's published tokenizer and config)",
              forced_bos_from_generation=True)
MBART = dataclasses.replace(BART, label="mBART-50")
