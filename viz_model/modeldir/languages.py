"""Which languages a model translates between: ``languages.json`` in its model directory (``{"source": "en",
"target": "de"}``, ISO codes), written by ``viz-model import``; a directory without one is this project's own
English -> German model. Labels and texts of the app take the names from here, never a fixed "German"."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

LANGUAGES = "languages.json"
CODE = re.compile(r"[A-Za-z]{2,3}(?:[_-][A-Za-z0-9]{2,8})?|mul")
NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "nl": "Dutch",
         "pt": "Portuguese", "ru": "Russian", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ar": "Arabic",
         "tr": "Turkish", "pl": "Polish", "sv": "Swedish", "da": "Danish", "fi": "Finnish", "cs": "Czech",
         "uk": "Ukrainian", "el": "Greek", "hi": "Hindi", "ro": "Romanian", "hu": "Hungarian",
         "mul": "several languages"}
# NLLB's codes start with ISO 639-3 (deu_Latn, zho_Hans): the same names
NAMES |= {three: NAMES[two] for three, two in {
    "eng": "en", "deu": "de", "fra": "fr", "spa": "es", "ita": "it", "nld": "nl", "por": "pt", "rus": "ru",
    "zho": "zh", "jpn": "ja", "kor": "ko", "arb": "ar", "tur": "tr", "pol": "pl", "swe": "sv", "dan": "da",
    "fin": "fi", "ces": "cs", "ukr": "uk", "ell": "el", "hin": "hi", "ron": "ro", "hun": "hu"}.items()}


class LanguagesError(ValueError):
    """languages.json is malformed; the message names the file."""


@dataclass(frozen=True)
class LanguagePair:
    source: str = "en"
    target: str = "de"

    @property
    def source_name(self) -> str:
        return name(self.source)

    @property
    def target_name(self) -> str:
        return name(self.target)

    @property
    def label(self) -> str:
        return f"{self.source} → {self.target}"


def name(code: str) -> str:
    """The English name of a language code ("de" -> "German"); the code itself when it is not in the table."""
    return NAMES.get(code.split("_")[0].split("-")[0].lower(), code)


def read_languages(directory: Path, read=None) -> LanguagePair:
    """The directory's language pair (English -> German when it has no languages.json). `read` returns a file's
    text under the checks every model file gets (default: a plain read)."""
    path = directory / LANGUAGES
    if not path.is_file():
        return LanguagePair()
    text = read(path) if read is not None else path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        pair = LanguagePair(str(data["source"]), str(data["target"]))
    except (ValueError, KeyError, TypeError) as err:
        raise LanguagesError(f"{path}: expected {{\"source\": CODE, \"target\": CODE}} ({err})") from None
    for code in (pair.source, pair.target):
        if not CODE.fullmatch(code):
            raise LanguagesError(f"{path}: {code!r} is not a language code such as en, de or pt_BR")
    return pair


def guess_languages(*names: str) -> LanguagePair | None:
    """The pair an opus-mt name states (``Helsinki-NLP/opus-mt-en-de`` -> en, de), or None."""
    for text in names:
        found = re.search(r"opus-mt-([A-Za-z_]+)-([A-Za-z_]+)", text or "")
        if found and all(CODE.fullmatch(c) for c in found.groups()):
            return LanguagePair(*found.groups())
    return None
