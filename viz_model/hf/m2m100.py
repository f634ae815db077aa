"""M2M100 and NLLB: pre-norm with a final layer norm on each stack (``norm="pre"``), fairseq's sinusoids (halves,
``sinusoid_frequencies="fairseq"``, counted from row 2: ``position_offset``), decoding from ``</s>`` with the
target language's code forced first (``forced_first_id``); its tokenizer is `M2M100Tokenizer`, for the language
pair chosen at import (an NLLB model's ids read from its tokenizer.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..config import ModelConfig
from ..modeldir.languages import LanguagePair
from ..tokenization.imported import PretrainedTokenizer
from ..tokenization.pretrained import M2M100_LANGUAGE_CODES, M2M100Tokenizer, id_table
from ..tokenization.tokenizer import TokenizerError
from .common import (
    MAX_TOKENIZER_JSON_BYTES,
    Family,
    HFImportError,
    added_codes,
    language_pair,
    need,
    read_json_file,
    tokenizer_settings,
)
from .fairseq import checked_activation, fairseq_config, map_weights

NLLB_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")  # eng_Latn, zho_Hans, ...
M2M100_POSITION_OFFSET = 2  # fairseq numbers positions from the pad id (1) + 1


def model_config(hf: dict[str, Any], path: Path, unk_id: int, forced_first_id: int | None = None) -> ModelConfig:
    """Our `ModelConfig` for an M2M100 config: pre-norm with final norms, fairseq sinusoids from row 2, the
    language code forced."""
    activation = checked_activation(hf, path, {"scale_embedding": True})
    pad = need(hf, "pad_token_id", path)
    start = hf.get("decoder_start_token_id")
    if hf.get("pad_token_id") != 1:
        raise HFImportError(f"{path}: pad_token_id {pad}; M2M100 positions are counted from pad id 1")
    return fairseq_config(hf, path, unk_id, activation, norm="pre", sinusoid_layout="halves",
                          sinusoid_frequencies="fairseq", position_offset=M2M100_POSITION_OFFSET,
                          bos_id=need(hf, "eos_token_id", path) if start is None else start,
                          forced_first_id=forced_first_id)


def tokenizer(folder: Path, hf: dict[str, Any], source: str | None, target: str | None) -> M2M100Tokenizer:
    """The M2M100 tokenizer of `folder` for the language pair given (else the one its tokenizer_config.json
    names): M2M100's own files, or an NLLB model's (the same architecture; its ids read from tokenizer.json)."""
    vocab_size = hf.get("vocab_size", 0)
    settings = tokenizer_settings(folder)
    path = folder / "tokenizer_config.json"
    try:
        if (folder / "vocab.json").is_file() or not (folder / "tokenizer.json").is_file():
            files, codes = m2m100_files(folder, settings.get("language_codes", "m2m100"), path)
        else:
            files, codes = nllb_files(folder)
        pair = language_pair(codes, source, target, settings, path)
        files["language_codes.json"] = M2M100Tokenizer.language_file(codes, pair["source"], pair["target"],
                                                                     vocab_size)
        return M2M100Tokenizer.from_files(files, folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None


def m2m100_files(folder: Path, kind: str, settings_path: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    """An M2M100 tokenizer's files and its language codes' ids (after the vocabulary, in fairseq's order)."""
    if kind not in M2M100_LANGUAGE_CODES:
        raise HFImportError(f"{settings_path}: language_codes {kind!r} is not one this project knows "
                            f"({', '.join(M2M100_LANGUAGE_CODES)})")
    names = ("sentencepiece.bpe.model", "vocab.json")
    try:
        files = {name: (folder / name).read_bytes() for name in names}
    except OSError as err:
        raise HFImportError(f"{folder}: an M2M100 tokenizer needs {' and '.join(names)} ({err})") from None
    size = len(id_table(files["vocab.json"], folder / "vocab.json"))
    return files, {code: size + i for i, code in enumerate(M2M100_LANGUAGE_CODES[kind])}


def nllb_files(folder: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    """An NLLB tokenizer (``tokenizer.json`` beside ``sentencepiece.bpe.model``, no vocab.json): the pieces' ids
    from its BPE vocabulary and the language codes' ids (``eng_Latn``, ...) from its added tokens, as they are."""
    path = folder / "tokenizer.json"
    try:
        spm_model = (folder / "sentencepiece.bpe.model").read_bytes()
        data = read_json_file(path, MAX_TOKENIZER_JSON_BYTES, "not a tokenizer")
    except OSError as err:
        raise HFImportError(f"{folder}: an NLLB tokenizer needs sentencepiece.bpe.model and tokenizer.json "
                            f"({err})") from None
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = data.get("added_tokens") if isinstance(data, dict) else None
    if not (isinstance(vocab, dict) and isinstance(added, list) and all(isinstance(t, dict) for t in added)):
        raise HFImportError(f"{path}: expected a model vocabulary (model.vocab) and added_tokens")
    codes = added_codes(data, NLLB_CODE)
    if not codes:
        raise HFImportError(f"{path}: no language code (such as eng_Latn) among its added tokens")
    return {"sentencepiece.bpe.model": spm_model, "vocab.json": json.dumps(vocab).encode()}, codes


def languages(source: str, folder: Path, tokenizer: PretrainedTokenizer) -> LanguagePair:
    """The pair chosen at import."""
    assert isinstance(tokenizer, M2M100Tokenizer)
    return LanguagePair(tokenizer.source_language, tokenizer.target_language)


def conversion_lines(cfg: ModelConfig) -> list[str]:
    """How an M2M100 checkpoint maps onto the instrumented model, for its card."""
    return [f"- Pre-norm with a final layer norm on each stack, embeddings tied and scaled by sqrt(d_model); fairseq "
            f"sinusoids (halves, exp(-i ln(10000) / (d_model/2 - 1))) from row {cfg.position_offset}; "
            f"{cfg.activation} FFN; decoding starts from </s> (id {cfg.bos_id}) and the first output is forced to "
            f"the target language's code (id {cfg.forced_first_id}).",
            "- Tokenizer: sentencepiece.bpe.model and vocab.json copied as they are; language_codes.json holds the "
            "language codes' ids and the language pair chosen at import."]


FAMILY = Family("M2M100 / NLLB", tokenizer, model_config, map_weights, conversion_lines, languages, "vocab.json",
                "small random Marian, M2M100 and NLLB models (Marian also with two published opus-mt tokenizers "
                "and configs)")
