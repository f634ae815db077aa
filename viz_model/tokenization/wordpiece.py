"""Train a BERT-style WordPiece vocabulary (lowercased) for an encoder-only model, saved as an `EncoderTokenizer`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .encoder_tokenizer import RULES, EncoderTokenizer
from .tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, TokenizerError

CLS_ID, SEP_ID, MASK_ID = BOS_ID, EOS_ID, 4
SPECIALS = {"[PAD]": PAD_ID, "[UNK]": UNK_ID, "[CLS]": CLS_ID, "[SEP]": SEP_ID, "[MASK]": MASK_ID}
"""The special tokens and their fixed ids: padding at the trainer's pad id, [CLS] and [SEP] where ``<s>`` and
``</s>`` sit in this project's SentencePiece vocabularies."""


def train_wordpiece(lines: Iterable[str], vocab_size: int, directory: str | Path) -> EncoderTokenizer:
    """A WordPiece vocabulary of at most `vocab_size` ids learned from `lines` (BERT's normalizer, lowercasing, and
    pre-tokenizer; ``[CLS] A [SEP] B [SEP]`` around a text or a pair), its files written to `directory`."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise TokenizerError("cannot train a tokenizer on no text")
    backend = Backend(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False)
    backend.train_from_iterator(texts, trainer)
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", CLS_ID),
                                                                                  ("[SEP]", SEP_ID)])
    files = {"tokenizer.json": backend.to_str().encode("utf-8"),
             RULES: EncoderTokenizer.rules_file(ids=backend.get_vocab_size(with_added_tokens=True), mask_token="[MASK]",
                                                token_types=False, clean_up_spaces=True)}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    tokenizer = EncoderTokenizer.from_files(files, directory)
    if [tokenizer.backend.token_to_id(token) for token in SPECIALS] != list(SPECIALS.values()):
        raise TokenizerError(f"{directory}: the special tokens did not get the ids {SPECIALS}")
    return tokenizer
