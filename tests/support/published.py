"""The published t5-small and bart-large tokenizers and configs of `tests/fixtures/t5-bart` (see its SOURCES.md) as
Hugging Face folders with small random weights: the vocabulary, special ids and tasks as published."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from support.hf import randomise

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "t5-bart"
SMALL = {"t5-small": {"d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_decoder_layers": 2,
                      "num_heads": 4},
         "bart-large": {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
                        "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
                        "num_hidden_layers": 2}}  # bart-large's config carries num_hidden_layers too
CLASSES = {"t5-small": "T5ForConditionalGeneration", "bart-large": "BartForConditionalGeneration"}


def published(name: str) -> dict:
    """The published config.json of `name`."""
    return json.loads((FIXTURES / name / "config.json").read_text())


def unpacked(name: str, folder: Path) -> None:
    """The published files of `name` in `folder`, each gzip-compressed one decompressed."""
    shutil.copytree(FIXTURES / name, folder)
    for packed in folder.glob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()


def build_published_folder(name: str, folder: Path) -> Path:
    """`name`'s published files in `folder` with random weights of a small network (`SMALL`), saved by transformers;
    config.json and generation_config.json (or its absence) as published but the dimensions. Returns `folder`."""
    import torch
    import transformers

    unpacked(name, folder)
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
    if (FIXTURES / name / "generation_config.json").is_file():
        shutil.copy(FIXTURES / name / "generation_config.json", folder)
    return folder
