"""The tokenizer of an imported encoder-only model (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA): its ``tokenizer.json``
as transformers 5 builds it (WordPiece, byte-level BPE or Unigram; the post-processor puts ``[CLS] A [SEP] B [SEP]``
or ``<s> A </s></s> B </s>`` around a text or a pair) and ``encoder_tokenizer.json``: the model's id table, the mask
token, whether the model reads token types, and transformers' decode setting."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .pretrained import FolderFiles, read_json
from .tokenizer import TokenizerError
from .tokenizer_json import byte_level_label, clean_up_spaces, read_backend

RULES = "encoder_tokenizer.json"
RULE_KEYS = ("ids", "mask_token", "token_types", "clean_up_spaces")


@dataclass
class EncodedText:
    """A text (or a pair) as an encoder reads it.

    :ivar ids: the token ids, special tokens included
    :ivar type_ids: each token's type (0: the first text, 1: the second), all 0 where the model reads none
    :ivar words: per token, the index of its word (a special token is a word of its own)
    """

    ids: list[int]
    type_ids: list[int]
    words: list[int]


class EncoderTokenizer(FolderFiles):
    """Text (or a pair of texts) to an encoder's ids and token types, as transformers' tokenizer of its folder.

    :ivar rules: ``ids`` (the model's id table), ``mask_token`` (its text), ``token_types`` (the model reads token
        type ids: transformers' tokenizer returns them), ``clean_up_spaces``
    :ivar mask_id: the mask token's id
    :ivar skipped: the special tokens' ids, left out of decoded text
    """

    FILES = ("tokenizer.json", RULES)
    WHAT = "an imported encoder's tokenizer"
    MARKER = RULES

    def __init__(self, backend: Any, rules: dict[str, Any], files: dict[str, bytes], path: str | None = None) -> None:
        self.backend, self.rules, self._files, self.path = backend, rules, files, path
        mask_id = backend.token_to_id(rules["mask_token"])
        if mask_id is None:
            raise TokenizerError(f"{path or RULES}: the mask token {rules['mask_token']!r} is not in the tokenizer")
        self.mask_id: int = mask_id
        self.mask_token: str = rules["mask_token"]
        self.skipped = {i for i, token in backend.get_added_tokens_decoder().items() if token.special}
        self.byte_level = json.loads(files["tokenizer.json"]).get("decoder", {}).get("type") == "ByteLevel"
        size = backend.get_vocab_size(with_added_tokens=True)
        if rules["ids"] < size:
            raise TokenizerError(f"{path or RULES}: {rules['ids']} ids, but the tokenizer has {size}")

    @classmethod
    def from_files(cls, files: dict[str, bytes], directory: Path) -> EncoderTokenizer:
        """The tokenizer of its two files' bytes (`directory`: where they are, for messages)."""
        backend = read_backend(files, directory)
        rules = read_json(files[RULES], directory / RULES)
        if not isinstance(rules, dict) or set(rules) != set(RULE_KEYS):
            raise TokenizerError(f"{directory / RULES}: expected the keys {', '.join(RULE_KEYS)}")
        return cls(backend, rules, files, str(directory))

    @staticmethod
    def rules_file(**rules: Any) -> bytes:
        """The ``encoder_tokenizer.json`` of a model (see `rules`)."""
        return (json.dumps(rules, indent=1, ensure_ascii=False) + "\n").encode()

    @property
    def vocab_size(self) -> int:
        return self.rules["ids"]

    def encoded(self, text: str, pair: str | None = None) -> EncodedText:
        """`text` (and `pair`) as transformers' ``tokenizer(text, pair)`` gives them: ids, token types, words."""
        encoding = self.backend.encode(text, pair, add_special_tokens=True)
        words, word, last = [], -1, None
        for i, (sequence, index) in enumerate(zip(encoding.sequence_ids, encoding.word_ids)):
            key = (sequence, index)
            if index is None or key != last or encoding.ids[i] in self.skipped:
                word += 1
            words.append(word)
            last = key
        types = encoding.type_ids if self.rules["token_types"] else [0] * len(encoding.ids)
        return EncodedText(list(encoding.ids), list(types), words)

    def encode(self, text: str) -> list[int]:
        """The ids of `text`, special tokens included."""
        return self.encoded(text).ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of `ids` (``decode(ids, skip_special_tokens=...)``)."""
        text = self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return clean_up_spaces(text) if self.rules["clean_up_spaces"] else text

    def token_text(self, token_id: int) -> str:
        """One id as transformers' fill-mask pipeline writes its ``token_str``: ``decode([id])``."""
        return self.decode([token_id], skip_special_tokens=False)

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
