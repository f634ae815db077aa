"""The tokenizer of a folder whose ids come from its ``tokenizer.json`` (T5, BART, mBART): the file copied as it
is, with the rules of its family written beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tokenization.tokenizer import TokenizerError
from ..tokenization.tokenizer_json import JsonTokenizer
from .common import MAX_TOKENIZER_JSON_BYTES, HFImportError, read_json_file, tokenizer_settings


def tokenizer_json(folder: Path) -> dict[str, Any]:
    """The folder's tokenizer.json, parsed (it must be one)."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise HFImportError(f"{path}: missing (this model's tokenizer is read from its tokenizer.json, as "
                            "transformers 5 saves it)")
    data = read_json_file(path, MAX_TOKENIZER_JSON_BYTES, "not a tokenizer")
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise HFImportError(f"{path}: expected a tokenizer (a JSON object with its model)")
    return data


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
    files = {"tokenizer.json": (folder / "tokenizer.json").read_bytes(),
             "tokenizer_rules.json": JsonTokenizer.rules_file(**{**defaults, **rules, "ids": hf.get("vocab_size", 0),
                                                                 "decoder_start": decoder_start,
                                                                 "clean_up_spaces": clean})}
    try:
        return JsonTokenizer.from_files(files, folder)
    except TokenizerError as err:
        raise HFImportError(str(err)) from None
