"""`RulesTokenizer`: an imported model's ``tokenizer.json`` read by the ``tokenizers`` library with a rules file
beside it (what transformers adds around the pieces for that kind of model); a language model's (`LMTokenizer`) and
an encoder's (`EncoderTokenizer`) are two."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Self

from .pretrained import FolderFiles, read_json
from .tokenizer import TokenizerError
from .tokenizer_json import byte_level_label, read_backend


class RulesTokenizer(FolderFiles):
    """A ``tokenizer.json`` and its rules file `RULES` (the keys `RULE_KEYS`, `OPTIONAL_RULES` where a file written
    before a rule existed lacks it; ``ids`` is the model's id table).

    :ivar rules: the rules file's values
    :ivar skipped: the special tokens' ids, left out of decoded text
    :ivar byte_level: the pieces are byte-level BPE's (shown as text)
    """

    RULES: ClassVar[str] = ""
    RULE_KEYS: ClassVar[tuple[str, ...]] = ()
    OPTIONAL_RULES: ClassVar[dict[str, Any]] = {}

    def __init__(self, backend: Any, rules: dict[str, Any], files: dict[str, bytes], path: str | None = None) -> None:
        self.backend, self.rules, self._files, self.path = backend, rules, files, path
        self.skipped = {i for i, token in backend.get_added_tokens_decoder().items() if token.special}
        self.byte_level = json.loads(files["tokenizer.json"]).get("decoder", {}).get("type") == "ByteLevel"
        size = backend.get_vocab_size(with_added_tokens=True)
        if rules["ids"] < size:
            raise TokenizerError(f"{path or self.RULES}: {rules['ids']} ids, but the tokenizer has {size}")

    @classmethod
    def from_files(cls, files: dict[str, bytes], directory: Path) -> Self:
        """The tokenizer of its two files' bytes (`directory`: where they are, for messages)."""
        backend = read_backend(files, directory)
        rules = read_json(files[cls.RULES], directory / cls.RULES)
        if isinstance(rules, dict):
            rules = {**cls.OPTIONAL_RULES, **rules}
        if not isinstance(rules, dict) or set(rules) != set(cls.RULE_KEYS):
            raise TokenizerError(f"{directory / cls.RULES}: expected the keys {', '.join(cls.RULE_KEYS)}")
        return cls(backend, rules, files, str(directory))

    @staticmethod
    def rules_file(**rules: Any) -> bytes:
        """A rules file of these values."""
        return (json.dumps(rules, indent=1, ensure_ascii=False) + "\n").encode()

    @property
    def vocab_size(self) -> int:
        """The model's id table (it may reserve ids past the tokenizer's, as Qwen's does)."""
        return self.rules["ids"]

    def piece(self, token_id: int) -> str:
        """The display label of one id (a byte-level token as text, a word's leading space as ``▁``)."""
        token = self.backend.id_to_token(int(token_id))
        if token is None:
            return "<unk>"
        return byte_level_label(token) if self.byte_level and int(token_id) not in self.skipped else token

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def files(self) -> dict[str, bytes]:
        return dict(self._files)
