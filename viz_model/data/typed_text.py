"""The check of a text a person gives a model to translate: a string, not empty, not too long, no control
characters, valid Unicode."""

from __future__ import annotations

import unicodedata

MAX_INPUT_CHARS = 2000


def check_text(text: object, what: str = "text") -> str:
    """Reject what no model can translate, with a message that says why."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{what} is empty: type a sentence to translate")
    if len(text) > MAX_INPUT_CHARS:
        raise ValueError(f"{what} has {len(text)} characters; the limit is {MAX_INPUT_CHARS}")
    bad = sorted({c for c in text if unicodedata.category(c) == "Cc" and c not in "\t\n\r"})
    if bad:
        names = ", ".join(f"U+{ord(c):04X}" for c in bad[:5])
        raise ValueError(f"{what} contains control characters ({names}); remove them")
    lone = sorted({c for c in text if unicodedata.category(c) == "Cs"})
    if lone:  # half of a UTF-16 pair: not text at all, and SentencePiece cannot encode it
        names = ", ".join(f"U+{ord(c):04X}" for c in lone[:5])
        raise ValueError(f"{what} contains unpaired surrogate code points ({names}); it is not valid Unicode text")
    return text
