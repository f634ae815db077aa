"""The tokenizer of an imported encoder-only model (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA): its ``tokenizer.json``
as transformers 5 builds it (WordPiece, byte-level BPE or Unigram; the post-processor puts ``[CLS] A [SEP] B [SEP]``
or ``<s> A </s></s> B </s>`` around a text or a pair) and ``encoder_tokenizer.json``: the model's id table, the mask
token, whether the model reads token types, and transformers' decode setting."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .rules_tokenizer import RulesTokenizer
from .tokenizer import TokenizerError
from .tokenizer_json import clean_up_spaces

RULES = "encoder_tokenizer.json"
RULE_KEYS = ("ids", "mask_token", "token_types", "clean_up_spaces")


@dataclass
class EncodedText:
    """A text (or a pair) as an encoder reads it.

    :ivar ids: the token ids, special tokens included
    :ivar type_ids: each token's type (0: the first text, 1: the second), all 0 where the model reads none
    :ivar words: per token, the index of its word (a special token is a word of its own)
    :ivar lengths: the tokens of the text and (of a pair) of the second, special tokens left out
    """

    ids: list[int]
    type_ids: list[int]
    words: list[int]
    lengths: tuple[int, ...] = ()


class EncoderTokenizer(RulesTokenizer):
    """Text (or a pair of texts) to an encoder's ids and token types, as transformers' tokenizer of its folder.

    :ivar rules: ``ids`` (the model's id table), ``mask_token`` (its text), ``token_types`` (the model reads token
        type ids: transformers' tokenizer returns them), ``clean_up_spaces``
    :ivar mask_id: the mask token's id
    :ivar skipped: the special tokens' ids, left out of decoded text
    """

    FILES = ("tokenizer.json", RULES)
    WHAT = "an imported encoder's tokenizer"
    MARKER = RULES
    RULES = RULES
    RULE_KEYS = RULE_KEYS

    def __init__(self, backend: Any, rules: dict[str, Any], files: dict[str, bytes], path: str | None = None) -> None:
        super().__init__(backend, rules, files, path)
        mask_id = backend.token_to_id(rules["mask_token"])
        if mask_id is None:
            raise TokenizerError(f"{path or RULES}: the mask token {rules['mask_token']!r} is not in the tokenizer")
        self.mask_id: int = mask_id
        self.mask_token: str = rules["mask_token"]

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
        lengths = tuple(encoding.sequence_ids.count(k) for k in range(1 if pair is None else 2))
        return EncodedText(list(encoding.ids), list(types), words, lengths)

    def encode(self, text: str) -> list[int]:
        """The ids of `text`, special tokens included."""
        return self.encoded(text).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """The ids of each text, special tokens included."""
        return [list(encoding.ids) for encoding in self.backend.encode_batch(texts)]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of `ids` (``decode(ids, skip_special_tokens=...)``)."""
        text = self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return clean_up_spaces(text) if self.rules["clean_up_spaces"] else text

    def token_text(self, token_id: int) -> str:
        """One id as transformers' fill-mask pipeline writes its ``token_str``: ``decode([id])``."""
        return self.decode([token_id], skip_special_tokens=False)
