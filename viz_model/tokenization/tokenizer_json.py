"""The tokenizer of an imported T5, BART or mBART model: its ``tokenizer.json`` read by the ``tokenizers`` library
(what transformers 5 itself runs), and ``tokenizer_rules.json`` (written at import) saying what goes around the
pieces, as transformers' tokenizers of those families put it: T5 ``[task prefix] X </s>``, BART ``<s> X </s>``,
mBART-50 ``[language code] X </s>``, the original mBART ``X </s> [language code]``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..config.checks import is_int
from .pretrained import FolderFiles, read_json
from .tokenizer import WORD_START, TokenizerError

RULES = "tokenizer_rules.json"
UNK_SHOWN = " ⁇ "  # how every tokenizer of this project shows <unk> in text


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's map of the 256 bytes to printable characters (byte-level BPE's pieces), reversed: char -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars)}


BYTES = byte_level_alphabet()


def read_backend(files: dict[str, bytes], directory: Path) -> Any:
    """The ``tokenizers`` library's tokenizer of ``files["tokenizer.json"]``, its stored truncation and padding left
    unused (transformers' tokenizer turns both off for a text it is given alone); one line where the package is
    missing or the file is no tokenizer."""
    try:
        from tokenizers import Tokenizer as Backend
    except ImportError:
        raise TokenizerError(f"{directory}: this model's tokenizer needs the tokenizers package "
                             "(pip install tokenizers)") from None
    try:
        backend = Backend.from_str(files["tokenizer.json"].decode("utf-8"))
    except Exception as err:  # the library raises its own Exception types
        raise TokenizerError(f"{directory / 'tokenizer.json'}: not a readable tokenizer ({err})") from None
    backend.no_truncation()
    backend.no_padding()
    return backend


def byte_level_label(token: str) -> str:
    """A byte-level BPE token as text where it is whole characters, a word's leading space as ``▁``."""
    if not all(c in BYTES for c in token):
        return token
    try:
        text = bytes(BYTES[c] for c in token).decode("utf-8")
    except UnicodeDecodeError:  # part of a character: the bytes as byte-level BPE writes them
        return token.replace("Ġ", WORD_START)
    return WORD_START + text[1:] if text.startswith(" ") else text


def clean_up_spaces(text: str) -> str:
    """transformers' ``clean_up_tokenization``: no space before punctuation and English contractions."""
    for spaced, joined in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                           (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(spaced, joined)
    return text


class JsonTokenizer(FolderFiles):
    """Text to the model's ids and back through a ``tokenizer.json``, with the rules of its family.

    :ivar rules: ``tokenizer_rules.json``: ``before`` (tokens before the pieces on both sides, BART's ``<s>``),
        ``text_prefix`` (put before a source text: T5's task prefix), ``task_prefix`` (optional: true for a model
        that reads its task from that prefix, T5's family; absent: whether there is a prefix), ``codes`` /
        ``source`` / ``target`` (the
        language codes' ids and the chosen pair of a many-to-many model), ``ids`` (the model's id table),
        ``decoder_start`` (the decoder's first input), ``clean_up_spaces`` (transformers' decode cleans spaces),
        ``code_after_eos`` (optional, default false): the language codes go after ``</s>``, the source's after the
        source's and the target's as the decoder's start (the original mBART's ``X </s> [code]``), not before the
        pieces with the target's forced first (mBART-50's); ``tasks`` (optional): a T5's translation tasks, each
        {source, target, prefix}, in its config's order, where it names several (`for_task` switches between them)
    :ivar source_language: the source language's code (None for a model of one fixed pair)
    :ivar target_language: the target language's code (None for a model of one fixed pair)
    :ivar target_code: the target language code's id where it is the forced first output (None: nothing forced)
    :ivar target_start: the decoder's start (``decoder_start``: the target language code's id) where it is the
        target's code (``code_after_eos``), else None
    :ivar after_eos: the ids after a source's ``</s>`` (``code_after_eos``: the source language's code), else ()
    """

    FILES = ("tokenizer.json", RULES)
    WHAT = "an imported tokenizer"
    MARKER = RULES

    def __init__(self, backend: Any, rules: dict[str, Any], files: dict[str, bytes], path: str | None = None) -> None:
        self.backend, self.rules, self._files, self.path = backend, rules, files, path
        self._labels: dict[int, str] = {}  # piece's labels by id, filled as asked for
        name = path or RULES
        vocab = backend.get_vocab(with_added_tokens=True)
        missing = [t for t in ("</s>", "<unk>", "<pad>", *rules["before"]) if t not in vocab]
        if missing:
            raise TokenizerError(f"{name}: no {', '.join(missing)} in the tokenizer's vocabulary")
        self.eos_id, self.unk_id, self.pad_id = vocab["</s>"], vocab["<unk>"], vocab["<pad>"]
        self.bos_id = rules["decoder_start"]
        self.before = [vocab[t] for t in rules["before"]]
        self.codes: dict[str, int] = rules["codes"]
        for side in ("source", "target"):
            if self.codes and rules[side] not in self.codes:
                raise TokenizerError(f"{name}: {side} language {rules[side]!r} is not one of the model's codes "
                                     f"({', '.join(self.codes)})")
        self.source_language, self.target_language = rules["source"], rules["target"]
        source_code = [self.codes[rules["source"]]] if self.codes else []
        target_code = self.codes[rules["target"]] if self.codes else None
        after = bool(rules.get("code_after_eos", False))
        self._before_source, self.after_eos = (self.before, tuple(source_code)) if after else \
            (self.before + source_code, ())
        self.target_code, self.target_start = (None, self.bos_id) if after else (target_code, None)
        specials = {i for i, token in backend.get_added_tokens_decoder().items() if token.special}
        self.skipped = (specials | set(self.codes.values())) - {self.unk_id}
        self.byte_level = json.loads(files["tokenizer.json"]).get("decoder", {}).get("type") == "ByteLevel"
        if rules["ids"] < backend.get_vocab_size(with_added_tokens=True):
            raise TokenizerError(f"{name}: {rules['ids']} ids, but the tokenizer has "
                                 f"{backend.get_vocab_size(with_added_tokens=True)}")

    @classmethod
    def from_files(cls, files: dict[str, bytes], directory: Path) -> JsonTokenizer:
        """The tokenizer of its two files' bytes (`directory`: where they are, for messages)."""
        backend = read_backend(files, directory)
        rules = read_json(files[RULES], directory / RULES)
        if not (isinstance(rules, dict) and _valid_rules(rules)):
            raise TokenizerError(f"{directory / RULES}: expected before, text_prefix, codes, source, target, ids, "
                                 "decoder_start and clean_up_spaces")
        return cls(backend, rules, files, str(directory))

    @staticmethod
    def rules_file(**rules: Any) -> bytes:
        """The ``tokenizer_rules.json`` of a model (see `rules`)."""
        return (json.dumps(rules, indent=1, ensure_ascii=False) + "\n").encode()

    def for_target(self, code: str) -> JsonTokenizer:
        """This tokenizer with `code` as the target language (the files' tokenizer shared); the decoder's start too,
        where it is the target's code."""
        start = {} if self.target_start is None else {"decoder_start": self.codes[code]}
        return self._with_rules(target=code, **start)

    @property
    def tasks(self) -> list[dict[str, str]]:
        """The translation tasks a T5 model's config names, each {source, target, prefix} ([] where it names one
        or none)."""
        return [dict(task) for task in self.rules.get("tasks", [])]

    def for_task(self, source: str, target: str) -> JsonTokenizer:
        """This tokenizer putting the prefix of its task from `source` to `target` (one of `tasks`) before every
        source text, with that pair as its languages (the files' tokenizer shared)."""
        found = [t for t in self.tasks if (t["source"], t["target"]) == (source, target)]
        if not found:
            named = ", ".join(f"{t['source']} to {t['target']}" for t in self.tasks) or "none"
            raise ValueError(f"no translation task from {source!r} to {target!r} (this model's: {named})")
        return self._with_rules(text_prefix=found[0]["prefix"], source=source, target=target)

    @property
    def reads_task_prefix(self) -> bool:
        """Whether the model reads its task from a prefix of the source text (T5's family)."""
        return bool(self.rules.get("task_prefix", bool(self.rules["text_prefix"])))

    def with_text_prefix(self, prefix: str) -> JsonTokenizer:
        """This tokenizer putting `prefix` before every source text (the files' tokenizer shared)."""
        return self._with_rules(text_prefix=prefix)

    def _with_rules(self, **changes: Any) -> JsonTokenizer:
        rules = {**self.rules, **changes}
        return type(self)(self.backend, rules, {**self._files, RULES: self.rules_file(**rules)}, self.path)

    @property
    def vocab_size(self) -> int:
        """The model's id table (it may reserve ids past the tokenizer's, as T5's does)."""
        return self.rules["ids"]

    def _pieces(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode(self, text: str) -> list[int]:
        """Source ids up to ``</s>``, without it: the tokens before, the source language's code (unless it goes
        `after_eos`), the pieces of the task prefix and `text`."""
        return [*self._before_source, *self._pieces(self.rules["text_prefix"] + text)]

    def encode_target(self, text: str) -> list[int]:
        """Target ids without ``</s>``: the tokens before, the target language's code where it is forced first, the
        pieces of `text`."""
        code = [] if self.target_code is None else [self.target_code]
        return [*self.before, *code, *self._pieces(text)]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_target_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_target(t) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        """Target text; special tokens and language codes are skipped, ``<unk>`` stays visible (as ⁇)."""
        kept = [int(i) for i in ids if int(i) not in self.skipped and int(i) < self.vocab_size]
        text = self.backend.decode(kept, skip_special_tokens=False).replace("<unk>", UNK_SHOWN)
        return clean_up_spaces(text) if self.rules["clean_up_spaces"] else text

    def piece(self, token_id: int) -> str:
        """The display label of one id: its token, a byte-level one as text where it is whole characters, a word's
        leading space as ``▁`` (each label worked out once)."""
        token_id = int(token_id)
        label = self._labels.get(token_id)
        if label is None:
            label = self._labels[token_id] = self._label(token_id)
        return label

    def _label(self, token_id: int) -> str:
        token = self.backend.id_to_token(token_id)
        if token is None:
            return "<unk>"
        if not self.byte_level or token_id in self.skipped:
            return token
        return byte_level_label(token)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.piece(i) for i in ids]

    def files(self) -> dict[str, bytes]:
        return dict(self._files)


def _valid_rules(rules: dict[str, Any]) -> bool:
    """``tokenizer_rules.json`` has every key with a value of its type."""
    def is_id(value: object) -> bool:
        return is_int(value, 0)

    return (isinstance(rules.get("before"), list) and all(isinstance(t, str) for t in rules["before"])
            and isinstance(rules.get("text_prefix"), str) and isinstance(rules.get("codes"), dict)
            and all(isinstance(k, str) and is_id(v) for k, v in rules["codes"].items())
            and all(side in rules and (rules[side] is None or isinstance(rules[side], str))
                    for side in ("source", "target"))
            and is_id(rules.get("ids")) and is_id(rules.get("decoder_start"))
            and isinstance(rules.get("clean_up_spaces"), bool) and isinstance(rules.get("task_prefix", False), bool)
            and isinstance(rules.get("code_after_eos", False), bool)
            and isinstance(rules.get("tasks", []), list)
            and all(isinstance(t, dict) and set(t) == {"source", "target", "prefix"}
                    and all(isinstance(v, str) for v in t.values()) for t in rules.get("tasks", [])))
