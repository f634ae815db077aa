"""SentencePiece tokenizer with one vocabulary shared by source and target.

Special ids are fixed: 0 = ``<pad>``, 1 = ``<unk>``, 2 = ``<s>``, 3 = ``</s>``. Pieces keep
SentencePiece's ``▁`` marker at the start of a word, so word boundaries stay visible in every view.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)  # this project's SentencePiece's special ids
WORD_START = "\u2581"  # ▁


class TokenizerError(ValueError):
    """The tokenizer file is missing, unreadable or does not fit the model."""


class Tokenizer:
    """Encode text to ids and back; give display pieces and word groups for the views."""

    after_eos: tuple[int, ...] = ()  # nothing follows a source's </s>

    def __init__(self, processor: spm.SentencePieceProcessor, path: str | None = None) -> None:
        self.sp = processor
        self.path = path
        specials = {"pad": (processor.pad_id(), PAD_ID), "unk": (processor.unk_id(), UNK_ID),
                    "bos": (processor.bos_id(), BOS_ID), "eos": (processor.eos_id(), EOS_ID)}
        for name, (got, want) in specials.items():
            if got != want:
                raise TokenizerError(f"{path or 'tokenizer'}: {name} id is {got}, expected {want}; "
                                     "train it with viz_model.tokenization.tokenizer.train_tokenizer")

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        path = Path(path)
        if not path.is_file():
            raise TokenizerError(f"{path}: tokenizer model file not found")
        processor = spm.SentencePieceProcessor()
        try:
            processor.Load(str(path))
        except (OSError, RuntimeError) as err:
            raise TokenizerError(f"{path}: not a readable SentencePiece model ({err})") from None
        return cls(processor, str(path))

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, without ``<s>``/``</s>``; unknown characters become ``<unk>`` (never dropped)."""
        return self.sp.encode(text, out_type=int)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.sp.encode(texts, out_type=int)

    # one vocabulary for both sides: a target text encodes as a source text does (a Marian tokenizer differs)
    encode_target = encode
    encode_target_batch = encode_batch

    def files(self) -> dict[str, bytes]:
        """The files this tokenizer is saved as in a model directory."""
        return {"tokenizer.model": self.serialized()}

    def decode(self, ids: Iterable[int]) -> str:
        """Detokenized text; ``<pad>``, ``<s>`` and ``</s>`` are skipped, ``<unk>`` stays visible (as ⁇)."""
        return self.sp.decode([int(i) for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)])

    def piece(self, token_id: int) -> str:
        """The display label of one id (``<s>``, ``</s>``, ``<unk>`` shown as such)."""
        return self.sp.id_to_piece(int(token_id))

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def serialized(self) -> bytes:
        """The model file's bytes (to copy it into a model directory)."""
        return self.sp.serialized_model_proto()


def word_ids(pieces: list[str]) -> list[int]:
    """Index of the word each piece belongs to; a special token (``<s>``, ``</s>``) is a word of its own."""
    result, word = [], -1
    for i, piece in enumerate(pieces):
        if i == 0 or _is_special(piece) or piece.startswith(WORD_START) or _is_special(pieces[i - 1]):
            word += 1
        result.append(word)
    return result


def _is_special(piece: str) -> bool:
    return piece in ("<s>", "</s>", "<pad>")


def train_tokenizer(texts: Iterable[str], model_path: str | Path, vocab_size: int = 8000,
                    model_type: str = "bpe", character_coverage: float = 1.0) -> Tokenizer:
    """Train a joint SentencePiece model on `texts` and write it to `model_path` (``.model``)."""
    model_path = Path(model_path)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        count = 0
        with corpus.open("w", encoding="utf-8") as f:
            for line in texts:
                line = line.strip()
                if line:
                    f.write(line + "\n")
                    count += 1
        if count == 0:
            raise TokenizerError("cannot train a tokenizer on no text")
        try:
            spm.SentencePieceTrainer.train(
                input=str(corpus), model_writer=buffer, vocab_size=vocab_size, model_type=model_type,
                character_coverage=character_coverage, pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID,
                eos_id=EOS_ID, pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
                input_sentence_size=2_000_000, shuffle_input_sentence=True, num_threads=os.cpu_count() or 1,
                minloglevel=2, hard_vocab_limit=False)
        except RuntimeError as err:
            raise TokenizerError(f"tokenizer training failed: {err}") from None
    tmp_path = model_path.with_suffix(".tmp")
    tmp_path.write_bytes(buffer.getvalue())
    os.replace(tmp_path, model_path)
    return Tokenizer.load(model_path)
