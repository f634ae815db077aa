"""The tokenizers of imported models, one per kind of files, and which one a model directory has."""

from __future__ import annotations

from pathlib import Path

from .encoder_tokenizer import EncoderTokenizer
from .lm_tokenizer import LMTokenizer
from .pretrained import M2M100Tokenizer, MarianTokenizer
from .tokenizer_json import JsonTokenizer

PretrainedTokenizer = MarianTokenizer | M2M100Tokenizer | JsonTokenizer | LMTokenizer | EncoderTokenizer
PRETRAINED_TOKENIZERS: tuple[type[PretrainedTokenizer], ...] = (MarianTokenizer, M2M100Tokenizer, JsonTokenizer,
                                                                 LMTokenizer, EncoderTokenizer)


def pretrained_tokenizer_class(directory: Path) -> type[PretrainedTokenizer] | None:
    """The tokenizer of an imported model's directory (by its marker file); None for this project's own."""
    return next((cls for cls in PRETRAINED_TOKENIZERS if (directory / cls.MARKER).exists()), None)


def decoder_start(tokenizer: PretrainedTokenizer, default: int) -> int:
    """The decoder's first input: the target language's code where the tokenizer's model starts from it (the
    original mBART), else `default` (the config's)."""
    return default if tokenizer.target_start is None else tokenizer.target_start
