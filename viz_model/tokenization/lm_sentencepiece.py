"""This project's SentencePiece tokenizer as a language model trained by `viz-model train` reads it: each text starts
with ``<s>``, a continuation ends at ``</s>``; it answers what `LanguageModel` asks of an imported model's
`LMTokenizer`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .lm_tokenizer import NO_CHAT_TEMPLATE
from .tokenizer import BOS_ID, EOS_ID, Tokenizer


class SentencePieceLM:
    """A trained language model's `Tokenizer`, with `LMTokenizer`'s face.

    :ivar tokenizer: the wrapped `Tokenizer`
    :ivar rules: as `LMTokenizer.rules`: its ids, ``eos`` ``[</s>]``, no chat template, greedy decoding
    :ivar eos_ids: the ids that end a continuation (``</s>``)
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.path = tokenizer.path
        self.eos_ids: list[int] = [EOS_ID]
        self.eos_id = EOS_ID
        self.rules: dict[str, Any] = {"ids": tokenizer.vocab_size, "eos": self.eos_ids, "clean_up_spaces": False,
                                      "chat_template": None, "special_tokens": {}, "sampling": False}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def encode(self, text: str) -> list[int]:
        """``<s>`` and the ids of `text`, as the model read each line in training."""
        return [BOS_ID, *self.tokenizer.encode(text)]

    def continuation_ids(self, text: str) -> list[int]:
        """The ids of `text` as it follows a prompt: no ``<s>``."""
        return self.tokenizer.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, ``<s>``, ``</s>`` and padding left out."""
        return self.tokenizer.decode(ids)

    def chat_text(self, messages: object) -> str:
        """Refused in one line: a model trained on plain lines has no chat template."""
        raise ValueError(NO_CHAT_TEMPLATE)

    def chat_ids(self, messages: object) -> list[int]:
        return self.encode(self.chat_text(messages))

    def piece(self, token_id: int) -> str:
        """The display label of one id (SentencePiece's piece: ``▁`` starts a word)."""
        return self.tokenizer.piece(token_id)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return self.tokenizer.pieces(ids)

    def files(self) -> dict[str, bytes]:
        return self.tokenizer.files()
