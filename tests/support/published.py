"""Published tokenizer files and configs kept as test data in ``tests/fixtures`` (the large ones gzip-compressed to
keep the repository small), unpacked into a test's temporary folder; the t5-small and bart-large ones of
`tests/fixtures/t5-bart` (see its SOURCES.md) as Hugging Face folders with small random weights."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from support.hf import randomise

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
T5_BART = FIXTURES / "t5-bart"
SMALL = {"t5-small": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
                      "num_heads": 4},
         "bart-large": {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
                        "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
                        "num_hidden_layers": 2}}  # bart-large's config carries num_hidden_layers too
CLASSES = {"t5-small": "T5ForConditionalGeneration", "bart-large": "BartForConditionalGeneration"}


def unpacked(source: Path, folder: Path) -> Path:
    """A copy of the fixture folder `source` as `folder`, each ``*.gz`` file decompressed under its name without
    ``.gz``, and a byte-level BPE's ``vocab.json`` rebuilt from its ``merges.txt`` where the fixture keeps only the
    merges (`byte_level_vocab`); returns `folder`."""
    shutil.copytree(source, folder)
    for packed in folder.glob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    if (folder / "merges.txt").is_file() and not (folder / "vocab.json").exists():
        vocab = byte_level_vocab((folder / "merges.txt").read_text(encoding="utf-8"))
        (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return folder


def byte_level_vocab(merges: str) -> dict[str, int]:
    """A byte-level BPE vocabulary as GPT-2-style tokenizers number it (Qwen2's, whose published vocab.json this equals
    entry for entry): the 256 byte symbols in GPT-2's `bytes_to_unicode` order, then one entry per merge, in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    symbols = [chr(b) for b in printable] + [chr(256 + i) for i in range(len(others))]
    vocab = {symbol: i for i, symbol in enumerate(symbols)}
    for line in merges.splitlines():
        if line and not line.startswith("#version"):
            left, right = line.split(" ", 1)
            vocab[left + right] = len(vocab)
    return vocab


def published(name: str) -> dict:
    """The published config.json of t5-small or bart-large."""
    return json.loads((T5_BART / name / "config.json").read_text())


def build_published_folder(name: str, folder: Path) -> Path:
    """`name`'s published files in `folder` with random weights of a small network (`SMALL`), saved by transformers;
    config.json and generation_config.json (or its absence) as published but the dimensions. Returns `folder`."""
    import torch
    import transformers

    unpacked(T5_BART / name, folder)
    config = published(name) | SMALL[name]
    cls = getattr(transformers, CLASSES[name])
    model = cls(cls.config_class.from_dict(config))
    randomise(model)
    if name == "bart-large":
        with torch.no_grad():
            model.final_logits_bias.normal_(0, 1.0)
    model.save_pretrained(folder)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "generation_config.json").unlink()
    if (T5_BART / name / "generation_config.json").is_file():
        shutil.copy(T5_BART / name / "generation_config.json", folder)
    return folder


def their_pieces(hf_tok, ids: list[int], byte_level: bool) -> list[str]:
    """transformers' tokens of `ids` as this project labels them: a byte-level token of whole characters as its text,
    a leading space as ``▁`` (a token of part of a character keeps its bytes, ``Ġ`` as ``▁``)."""
    tokens = hf_tok.convert_ids_to_tokens(ids)
    if not byte_level:
        return tokens
    shown = [hf_tok.decode([i]) for i in ids]
    return [t.replace("Ġ", "▁") if "\ufffd" in s else "▁" + s[1:] if s.startswith(" ") else s
            for t, s in zip(tokens, shown)]
