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
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..tokenization.tokenizer import TokenizerError
from ..tokenization.tokenizer_json import JsonTokenizer
from .common import MAX_TOKENIZER_JSON_BYTES, HFImportError, read_json_file, tokenizer_settings

VOCABULARIES = ("tokenizer.json", "spiece.model", "sentencepiece.bpe.model")
"""The files transformers 5 reads a T5, BART or mBART tokenizer's vocabulary from."""


def tokenizer_json(folder: Path) -> dict[str, Any]:
    """The folder's tokenizer as transformers 5 builds it (`transformers_tokenizer`), else its tokenizer.json as it is,
    parsed (it must be one)."""
    built = transformers_tokenizer(folder)
    if built is not None:
        return json.loads(built)
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise HFImportError(f"{path}: missing (this model's tokenizer is read from its tokenizer.json, as "
                            "transformers 5 saves it; with transformers 5 installed, the import builds it as "
                            "transformers does)")
    data = read_json_file(path, MAX_TOKENIZER_JSON_BYTES, "not a tokenizer")
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise HFImportError(f"{path}: expected a tokenizer (a JSON object with its model)")
    return data


def transformers_tokenizer(folder: Path) -> str | None:
    """The folder's tokenizer as transformers 5 builds it (``AutoTokenizer``, local files only, no remote code),
    serialized as a tokenizer.json; None without transformers 5, where the folder has no vocabulary (no
    tokenizer.json or SentencePiece model: transformers would build an empty default), or where it cannot build one."""
    files = (*VOCABULARIES, "tokenizer_config.json", "config.json")
    stamp = tuple((name, path.stat().st_mtime_ns, path.stat().st_size) for name in files
                  if (path := folder / name).is_file())
    if not any(name in VOCABULARIES for name, *_ in stamp):
        return None
    return _built(str(folder.resolve()), stamp)


@lru_cache(maxsize=4)
def _built(folder: str, stamp: tuple) -> str | None:
    """`transformers_tokenizer` of `folder` with its tokenizer files as `stamp` says (once per version of them)."""
    try:
        import transformers
    except ImportError:
        return None
    if int(transformers.__version__.split(".")[0]) < 5:
        return None
    quiet = logging.getLogger("transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        built = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception:  # noqa: BLE001 -- any folder transformers cannot read: the file as it is decides
        return None
    finally:
        quiet.setLevel(level)
    backend = getattr(built, "backend_tokenizer", None)
    return None if backend is None else backend.to_str()


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
                   **rules: Any) -> JsonTokenizer:
    """The folder's `JsonTokenizer` with `rules` (before, text_prefix, codes, source, target; see
    `JsonTokenizer.rules`), the model's id table from config.json and transformers' decode setting."""
    data = tokenizer_json(folder)
    bpe = data["model"].get("type") == "BPE"  # transformers 5 does not clean BPE's spaces, unless told to
    clean = bool(settings.get("clean_up_tokenization_spaces", False)) and (
        not bpe or bool(settings.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output")))
    defaults = {"before": [], "text_prefix": "", "codes": {}, "source": None, "target": None}
    built = transformers_tokenizer(folder)
    files = {"tokenizer.json": (folder / "tokenizer.json").read_bytes() if built is None else built.encode(),
             "tokenizer_rules.json": JsonTokenizer.rules_file(**{**defaults, **rules, "ids": hf.get("vocab_size", 0),
                                                                 "decoder_start": decoder_start,
                                                                 "clean_up_spaces": clean})}
    try:
        return JsonTokenizer.from_files(files, folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None
