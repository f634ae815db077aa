"""Small Hugging Face translation models built locally (random weights, SentencePiece models trained here)."""

from __future__ import annotations

import random

WORDS_EN = ["a", "man", "woman", "dog", "cat", "plays", "runs", "in", "the", "snow", "park", "house", "red", "blue",
            "small", "big", "old", "young", "reads", "book"]
WORDS_DE = ["ein", "mann", "frau", "hund", "katze", "spielt", "läuft", "im", "schnee", "park", "haus", "rot", "blau",
            "klein", "groß", "alt", "jung", "liest", "buch"]
ODD = ["Ünïcödé ☃ snow.", "CAPS AND numbers 123!", "emoji 🙂 and 中文 text", "tabs\tand  spaces", "ß ø å æ œ"]


def sentences(words: list[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))).capitalize() + rng.choice([".", "!", "?"])
            for _ in range(count)]


def train_spm(lines: list[str], path, **special_ids: int) -> None:
    """A unigram SentencePiece model of about 60 pieces at ``path.model`` (Marian's special ids unless given)."""
    import sentencepiece as spm

    ids = {"unk_id": 1, "bos_id": -1, "eos_id": 0, "pad_id": -1, **special_ids}
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(path), vocab_size=60,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2,
                                   hard_vocab_limit=False, **ids)


def randomise(model, scale: float = 0.3) -> None:
    """Weights larger than the default init, so the attention maps are far from uniform."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, scale)
