"""Long prompts for tests: a tiny RoPE language model (random weights, the shipped model's SentencePiece tokenizer)
with room for 4,608 positions, a generated text of a given number of words, and a tiny imported Llama folder whose
config allows as many positions (for the app)."""

from __future__ import annotations

import json
import random

import torch

WORDS = ("a", "man", "in", "a", "red", "shirt", "is", "riding", "a", "bike", "down", "the", "street", "while", "two",
         "dogs", "run", "along", "the", "beach", "and", "a", "little", "girl", "with", "a", "blue", "hat", "looks",
         "at", "the", "water")
POSITIONS = 4608


def long_text(words: int, seed: int = 0) -> str:
    """`words` words drawn from `WORDS`, seeded: a prose-like prompt of about 1.2 tokens a word."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def long_language_model(seed: int = 0):
    """A `LanguageModel` of 2 layers, 4 query heads on 2 key/value heads, RoPE, `POSITIONS` positions, random
    weights, the shipped language model's tokenizer; CPU, fp32."""
    import viz_model
    from viz_model import LanguageModel
    from viz_model.config import ModelConfig
    from viz_model.nn.causal_lm import CausalLM

    shipped = viz_model.load("multi30k-lm-en", device="cpu")
    torch.manual_seed(seed)
    config = ModelConfig(kind="decoder", vocab_size=shipped.config.vocab_size, d_model=32, heads=4, kv_heads=2,
                         d_ff=64, encoder_layers=0, decoder_layers=2, max_positions=POSITIONS, positional="rope",
                         norm="pre", pad_id=0)
    return LanguageModel(CausalLM(config).eval(), shipped.tokenizer, name="long-lm")


def long_llama_folder(root):
    """A tiny Llama (tests/support/hf_lm.py's) saved with ``max_position_embeddings`` = `POSITIONS`."""
    from support.hf_lm import build_lm_folder

    folder = build_lm_folder(root, "llama")
    config = json.loads((folder / "config.json").read_text())
    config["max_position_embeddings"] = POSITIONS
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def long_lm_models(tmp_path_factory):
    """A models folder for the app: the default translator (copied) and `long_llama_folder`'s Llama imported as
    "llama"; returns it."""
    import shutil

    from support.app import APP
    from support.hf_lm import import_lm
    from viz_model.modeldir.shipped import DEFAULT_MODEL

    root = tmp_path_factory.mktemp("long-lm-models")
    shutil.copytree(APP.parents[1] / "assets" / DEFAULT_MODEL, root / DEFAULT_MODEL)
    import_lm(long_llama_folder(tmp_path_factory.mktemp("hf-lm")), root)
    return root
