"""The tokenizer of a folder whose ids come from its ``tokenizer.json`` (T5, BART, mBART), as transformers 5 runs it,
with the rules of its family written beside it.

transformers 5's tokenizer classes of these families rebuild their pipeline around the file's vocabulary (the
original mBART's has no normalizer, T5's splits on whitespace first), so a file another version wrote, such as a
hub folder converted from SentencePiece years ago, can give other ids than the file read as it is. Where
transformers 5 is installed the import therefore stores the tokenizer it builds from the folder (which also reads a
folder that has only SentencePiece's model, as hub mT5 folders); without it, the file as it is."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from ..tokenization.tokenizer import TokenizerError
from ..tokenization.tokenizer_json import JsonTokenizer
from .common import MAX_TOKENIZER_JSON_BYTES, HFImportError, read_json_file, tokenizer_settings

VOCABULARIES = ("tokenizer.json", "spiece.model", "sentencepiece.bpe.model", "spm.model", "merges.txt", "vocab.txt")
"""The files transformers 5 reads a tokenizer's vocabulary from (``spm.model``: DeBERTa-v2 / v3's SentencePiece model;
``merges.txt``: byte-level BPE's, with vocab.json, as GPT-2, BART and Qwen publish it; ``vocab.txt``: WordPiece's, as
older BERT folders publish it alone)."""

_LOGGING = threading.Lock()  # transformers' log level is the process's: one import at a time lowers it


def tokenizer_source(folder: Path) -> bytes:
    """The folder's tokenizer as a tokenizer.json: as transformers 5 builds it where it is installed
    (`transformers_tokenizer`), else the folder's file as it is (checked to be a tokenizer)."""
    built = transformers_tokenizer(folder)
    if built is not None:
        return built
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise HFImportError(f"{path}: missing (this model's tokenizer is read from its tokenizer.json, as "
                            "transformers 5 saves it, or built by transformers 5 where it is installed)")
    data = read_json_file(path, MAX_TOKENIZER_JSON_BYTES, "not a tokenizer")
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise HFImportError(f"{path}: expected a tokenizer (a JSON object with its model)")
    return path.read_bytes()


def transformers_tokenizer(folder: Path) -> bytes | None:
    """The folder's tokenizer as transformers 5 builds it (``AutoTokenizer``, local files only, no remote code),
    serialized as a tokenizer.json; None without transformers 5, or where the folder has no vocabulary (no
    tokenizer.json or SentencePiece model: transformers would build an empty default). A folder transformers 5
    cannot read is refused in one line naming why (the file as it is might give other ids)."""
    if not any((folder / name).is_file() for name in VOCABULARIES):
        return None
    try:
        import transformers
    except ImportError:
        return None
    if int(transformers.__version__.split(".")[0]) < 5:
        return None
    log = logging.getLogger("transformers")
    with _LOGGING:
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            built = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                                               trust_remote_code=False)
        except Exception as err:  # any reason transformers gives: its first line names it
            why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise HFImportError(f"{folder}: transformers {transformers.__version__} cannot build this folder's "
                                f"tokenizer ({why})") from None
        finally:
            log.setLevel(level)
    backend = getattr(built, "backend_tokenizer", None)
    if backend is None:
        raise HFImportError(f"{folder}: transformers builds no tokenizers-library tokenizer for this folder "
                            f"({type(built).__name__})")
    serialized = backend.to_str().encode()
    if len(serialized) > MAX_TOKENIZER_JSON_BYTES:
        raise HFImportError(f"{folder}: its tokenizer is larger than {MAX_TOKENIZER_JSON_BYTES:,} bytes")
    return serialized


def checked_class(folder: Path, known: tuple[str, ...]) -> dict[str, Any]:
    """tokenizer_config.json's settings, after checking that its tokenizer_class (where it names one) is one whose
    rules this family follows."""
    settings = tokenizer_settings(folder)
    name = settings.get("tokenizer_class")
    if name is not None and name not in known:
        raise HFImportError(f"{folder / 'tokenizer_config.json'}: tokenizer_class {name!r} is not one this model "
                            f"family's import follows ({', '.join(known)})")
    return settings


def json_tokenizer(folder: Path, hf: dict[str, Any], settings: dict[str, Any], decoder_start: int,
                   tokenizer_file: bytes | None = None, **rules: Any) -> JsonTokenizer:
    """The folder's `JsonTokenizer` (`tokenizer_file`: its `tokenizer_source`, where the caller read it already) with
    `rules` (before, text_prefix, codes, source, target; see `JsonTokenizer.rules`), the model's id table from
    config.json and transformers' decode setting."""
    tokenizer_file = tokenizer_source(folder) if tokenizer_file is None else tokenizer_file
    data = json.loads(tokenizer_file)
    bpe = data["model"].get("type") == "BPE"  # transformers 5 does not clean BPE's spaces, unless told to
    clean = bool(settings.get("clean_up_tokenization_spaces", False)) and (
        not bpe or bool(settings.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output")))
    defaults = {"before": [], "text_prefix": "", "codes": {}, "source": None, "target": None}
    files = {"tokenizer.json": tokenizer_file,
             "tokenizer_rules.json": JsonTokenizer.rules_file(**{**defaults, **rules, "ids": hf.get("vocab_size", 0),
                                                                 "decoder_start": decoder_start,
                                                                 "clean_up_spaces": clean})}
    try:
        return JsonTokenizer.from_files(files, folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None
