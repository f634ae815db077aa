"""The tokenizer of an imported decoder-only language model: its ``tokenizer.json`` as transformers 5 builds it (the
post-processor adds the BOS where the family does: Llama's ``<s>`` / ``<|begin_of_text|>``, none for GPT-2 or Qwen),
and ``lm_tokenizer.json``: the ids that end a continuation, the model's id table, the chat template."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .pretrained import read_files, read_json
from .tokenizer import TokenizerError
from .tokenizer_json import byte_level_label, clean_up_spaces, read_backend

RULES = "lm_tokenizer.json"
RULE_KEYS = ("ids", "eos", "clean_up_spaces", "chat_template")


class LMTokenizer:
    """Text to a language model's ids and back, as transformers' tokenizer of its folder.

    :ivar rules: ``ids`` (the model's id table), ``eos`` (the ids that end a continuation), ``clean_up_spaces``,
        ``chat_template`` (the folder's Jinja chat template or None)
    :ivar eos_ids: the ids that end a continuation
    :ivar skipped: the special tokens' ids, left out of decoded text
    """

    FILES = ("tokenizer.json", RULES)
    MARKER = RULES

    def __init__(self, backend: Any, rules: dict[str, Any], files: dict[str, bytes], path: str | None = None) -> None:
        self.backend, self.rules, self._files, self.path = backend, rules, files, path
        self.eos_ids: list[int] = list(rules["eos"])
        self.eos_id = self.eos_ids[0] if self.eos_ids else None
        self.skipped = {i for i, token in backend.get_added_tokens_decoder().items() if token.special}
        self.byte_level = json.loads(files["tokenizer.json"]).get("decoder", {}).get("type") == "ByteLevel"
        size = backend.get_vocab_size(with_added_tokens=True)
        if rules["ids"] < size:
            raise TokenizerError(f"{path or RULES}: {rules['ids']} ids, but the tokenizer has {size}")

    @classmethod
    def load(cls, directory: str | Path) -> LMTokenizer:
        directory = Path(directory)
        return cls.from_files(read_files(directory, cls.FILES, "an imported tokenizer"), directory)

    @classmethod
    def from_files(cls, files: dict[str, bytes], directory: Path) -> LMTokenizer:
        """The tokenizer of its two files' bytes (`directory`: where they are, for messages)."""
        backend = read_backend(files, directory)
        rules = read_json(files[RULES], directory / RULES)
        if not isinstance(rules, dict) or set(rules) != set(RULE_KEYS):
            raise TokenizerError(f"{directory / RULES}: expected the keys {', '.join(RULE_KEYS)}")
        return cls(backend, rules, files, str(directory))

    @staticmethod
    def rules_file(**rules: Any) -> bytes:
        """The ``lm_tokenizer.json`` of a model (see `rules`)."""
        return (json.dumps(rules, indent=1, ensure_ascii=False) + "\n").encode()

    @property
    def vocab_size(self) -> int:
        """The model's id table (it may reserve ids past the tokenizer's, as Qwen's does)."""
        return self.rules["ids"]

    def encode(self, text: str) -> list[int]:
        """The ids of `text` as transformers' ``tokenizer(text).input_ids`` gives them (BOS where the family adds
        one)."""
        return self.backend.encode(text, add_special_tokens=True).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids` with the special tokens left out (``decode(ids, skip_special_tokens=True)``)."""
        text = self.backend.decode([int(i) for i in ids], skip_special_tokens=True)
        return clean_up_spaces(text) if self.rules["clean_up_spaces"] else text

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
