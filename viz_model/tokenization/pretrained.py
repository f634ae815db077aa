"""The tokenizers of imported pretrained models, with the ids Hugging Face's tokenizers give (tested against them).

Both map SentencePiece pieces to the model's ids through a ``vocab.json`` table (a piece it lacks is ``<unk>``):
`MarianTokenizer` (opus-mt: ``source.spm`` and ``target.spm``, decoding starts from the pad id) and
`M2M100Tokenizer` (M2M100: one ``sentencepiece.bpe.model``, language codes such as ``__en__`` before the text of
either side, decoding starts from ``</s>``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Self

import sentencepiece as spm

from ..config.checks import is_int
from .tokenizer import TokenizerError

# the language codes of M2M100 checkpoints, in the order their ids follow the vocabulary (fairseq's dictionary)
M2M100_LANGUAGE_CODES = {
    "m2m100": ("af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy", "da", "de",
               "el", "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha", "he", "hi", "hr",
               "ht", "hu", "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk", "km", "kn", "ko", "lb", "lg",
               "ln", "lo", "lt", "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my", "ne", "nl", "no", "ns", "oc", "or",
               "pa", "pl", "ps", "pt", "ro", "ru", "sd", "si", "sk", "sl", "so", "sq", "sr", "ss", "su", "sv", "sw",
               "ta", "th", "tl", "tn", "tr", "uk", "ur", "uz", "vi", "wo", "xh", "yi", "yo", "zh", "zu"),
    "wmt21": ("en", "ha", "is", "ja", "cs", "ru", "zh", "de"),
}


def read_files(directory: Path, names: Sequence[str], what: str) -> dict[str, bytes]:
    """The bytes of each named file of `directory`; a missing one is an error naming it and the set."""
    files = {}
    for name in names:
        path = directory / name
        if not path.is_file():
            raise TokenizerError(f"{path}: missing ({what} is {', '.join(names)})")
        files[name] = path.read_bytes()
    return files


def processor(data: bytes, path: Path) -> spm.SentencePieceProcessor:
    """A SentencePiece model from its serialized bytes."""
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(data)
    except (OSError, RuntimeError) as err:
        raise TokenizerError(f"{path}: not a readable SentencePiece model ({err})") from None
    return sp


class FolderFiles:
    """A tokenizer read from named files of a folder: `FILES`, described as `WHAT` in messages, built by
    `from_files`."""

    FILES: tuple[str, ...] = ()
    WHAT = "a tokenizer"

    @classmethod
    def load(cls, directory: str | Path) -> Self:
        directory = Path(directory)
        return cls.from_files(read_files(directory, cls.FILES, cls.WHAT), directory)

    @classmethod
    def from_files(cls, files: dict[str, bytes], directory: Path) -> Self:
        raise NotImplementedError


def read_json(data: bytes, path: Path) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise TokenizerError(f"{path}: not valid JSON ({err})") from None


def id_table(data: bytes, path: Path) -> dict[str, int]:
    """``vocab.json``: pieces to ids >= 0."""
    vocab = read_json(data, path)
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and is_int(v, 0) for k, v in vocab.items()):
        raise TokenizerError(f"{path}: expected a mapping of pieces to ids >= 0")
    return vocab


class VocabTokenizer:
    """Pieces to ids through one table (``vocab.json``); the subclasses say how text becomes pieces."""

    FILES: tuple[str, ...] = ()
    MARKER = ""  # the file that tells this tokenizer's model directory from others
    eos_id: int
    unk_id: int
    pad_id: int
    bos_id: int
    target_code: int | None = None  # the forced first output (a many-to-many model's target language), else None
    target_start: int | None = None  # the decoder's first input where it is the target language's code: never here
    after_eos: tuple[int, ...] = ()  # nothing follows a source's </s>

    def __init__(self, vocab: dict[str, int], files: dict[str, bytes], path: str | None) -> None:
        self.encoder, self._files, self.path = vocab, files, path
        missing = [t for t in ("</s>", "<unk>", "<pad>") if t not in vocab]
        if missing:
            raise TokenizerError(f"{path or 'vocab.json'}: no {', '.join(missing)} in the vocabulary")
        self.decoder = {i: piece for piece, i in vocab.items()}
        self.eos_id, self.unk_id, self.pad_id = vocab["</s>"], vocab["<unk>"], vocab["<pad>"]

    @property
    def vocab_size(self) -> int:
        return max(self.decoder) + 1

    def _ids(self, pieces: list[str]) -> list[int]:
        return [self.encoder.get(p, self.unk_id) for p in pieces]

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode_target(self, text: str) -> list[int]:
        raise NotImplementedError

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_target_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_target(t) for t in texts]

    def piece(self, token_id: int) -> str:
        return self.decoder.get(int(token_id), "<unk>")

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def _text(self, sp: spm.SentencePieceProcessor, ids: Iterable[int], skip: set[int]) -> str:
        """The text of `ids` without the `skip` ids; ``<unk>`` stays visible (as ⁇)."""
        return sp.decode_pieces([self.piece(i) for i in ids if int(i) not in skip]).replace("<unk>", " ⁇ ")

    def files(self) -> dict[str, bytes]:
        return dict(self._files)


class MarianTokenizer(VocabTokenizer):
    """The tokenizer of a Marian (opus-mt) model: ``source.spm`` and ``target.spm`` cut text into pieces, and one
    ``vocab.json`` maps the pieces of both sides to the model's ids, as Hugging Face's ``MarianTokenizer`` does.
    ``</s>`` ends a source; decoding starts from the pad id."""

    FILES = ("source.spm", "target.spm", "vocab.json")
    MARKER = "source.spm"

    def __init__(self, source: spm.SentencePieceProcessor, target: spm.SentencePieceProcessor,
                 vocab: dict[str, int], files: dict[str, bytes], path: str | None = None) -> None:
        super().__init__(vocab, files, path)
        self.source, self.target = source, target
        self.bos_id = self.pad_id  # Marian's decoder_start_token_id

    @classmethod
    def load(cls, directory: str | Path) -> MarianTokenizer:
        directory = Path(directory)
        files = read_files(directory, cls.FILES, "a Marian tokenizer")
        return cls(processor(files["source.spm"], directory / "source.spm"),
                   processor(files["target.spm"], directory / "target.spm"),
                   id_table(files["vocab.json"], directory / "vocab.json"), files, str(directory))

    def encode(self, text: str) -> list[int]:
        """Source ids of `text`, without ``</s>`` (a leading ``>>xx<<`` language code is kept as its own token)."""
        code: list[str] = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[:end + 2]], text[end + 2:]
        return self._ids(code + self.source.encode(text, out_type=str))

    def encode_target(self, text: str) -> list[int]:
        """Target ids of `text` (the target side's SentencePiece model), without ``</s>``."""
        return self._ids(self.target.encode(text, out_type=str))

    def decode(self, ids: Iterable[int]) -> str:
        """Target text; ``<pad>`` and ``</s>`` are skipped, ``<unk>`` stays visible (as ⁇)."""
        return self._text(self.target, ids, {self.pad_id, self.eos_id})


class M2M100Tokenizer(FolderFiles, VocabTokenizer):
    """The tokenizer of an M2M100 or NLLB model: one ``sentencepiece.bpe.model`` for both sides, ``vocab.json``
    for the pieces' ids (an NLLB model's written at import from its tokenizer.json) and ``language_codes.json``
    (written at import: every code's id, the chosen source and target language, and the size of the model's id
    table). A source is ``__src__ pieces </s>``, a target ``__tgt__ pieces </s>``, as Hugging Face's tokenizers
    give them."""

    FILES = ("sentencepiece.bpe.model", "vocab.json", "language_codes.json")
    WHAT = "an M2M100 tokenizer"
    MARKER = "language_codes.json"

    def __init__(self, sp: spm.SentencePieceProcessor, vocab: dict[str, int], codes: dict[str, int], source: str,
                 target: str, ids: int, files: dict[str, bytes], path: str | None = None) -> None:
        super().__init__(vocab, files, path)
        self.sp, self.codes = sp, codes
        for side, code in (("source", source), ("target", target)):
            if code not in codes:
                raise TokenizerError(f"{path or 'language_codes.json'}: {side} language {code!r} is not one of the "
                                     f"model's codes ({', '.join(sorted(codes))})")
        self.source_language, self.target_language = source, target
        self.source_code, self.target_code = codes[source], codes[target]
        # M2M100's code "de" is the piece __de__; NLLB's codes (deu_Latn) are pieces as they are
        self.code_pieces = {i: code if "_" in code else f"__{code}__" for code, i in codes.items()}
        self.bos_id = self.eos_id  # M2M100's decoder_start_token_id
        self.ids = ids
        largest = max(max(self.decoder), max(self.code_pieces))
        if ids <= largest:
            raise TokenizerError(f"{path or 'language_codes.json'}: {ids} ids, but the tokenizer uses id {largest}")

    @classmethod
    def from_files(cls, files: dict[str, bytes], directory: Path) -> M2M100Tokenizer:
        """The tokenizer of its three files' bytes (`directory`: where they are, for messages)."""
        path = directory / "language_codes.json"
        data = read_json(files["language_codes.json"], path)
        if not (isinstance(data, dict) and isinstance(data.get("codes"), dict) and all(
                isinstance(k, str) and is_int(v, 0) for k, v in data["codes"].items())
                and isinstance(data.get("source"), str) and isinstance(data.get("target"), str)
                and isinstance(data.get("ids"), int)):
            raise TokenizerError(f"{path}: expected codes (language -> id), source, target and ids")
        return cls(processor(files["sentencepiece.bpe.model"], directory / "sentencepiece.bpe.model"),
                   id_table(files["vocab.json"], directory / "vocab.json"), data["codes"], data["source"],
                   data["target"], data["ids"], files, str(directory))

    def for_target(self, code: str) -> M2M100Tokenizer:
        """This tokenizer with `code` as the target language (the files and pieces shared)."""
        return type(self)(self.sp, self.encoder, self.codes, self.source_language, code, self.ids, self._files,
                          self.path)

    @staticmethod
    def language_file(codes: dict[str, int], source: str, target: str, ids: int) -> bytes:
        """The ``language_codes.json`` of a model: its codes' ids, the chosen pair and its id-table size."""
        return (json.dumps({"codes": codes, "source": source, "target": target, "ids": ids}, indent=1) + "\n").encode()

    @property
    def vocab_size(self) -> int:
        """The model's id table (it reserves ids past the language codes that no text encodes to)."""
        return self.ids

    def piece(self, token_id: int) -> str:
        token_id = int(token_id)
        return self.code_pieces.get(token_id) or self.decoder.get(token_id, "<unk>")

    def encode(self, text: str) -> list[int]:
        """Source ids: the source language's code and the pieces of `text`, without ``</s>``."""
        return [self.source_code, *self._ids(self.sp.encode(text, out_type=str))]

    def encode_target(self, text: str) -> list[int]:
        """Target ids: the target language's code (the forced first output) and the pieces, without ``</s>``."""
        return [self.target_code, *self._ids(self.sp.encode(text, out_type=str))]

    def decode(self, ids: Iterable[int]) -> str:
        """Target text; the special tokens and language codes are skipped, ``<unk>`` stays visible (as ⁇)."""
        skip = {self.pad_id, self.eos_id, self.encoder.get("<s>", self.eos_id), *self.code_pieces}
        return self._text(self.sp, ids, skip).strip()
