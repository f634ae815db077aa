"""Encoder-only folders fitted briefly by transformers on the Multi30K English captions (a masked-LM objective), from
configs no other test uses, cached on disk; held-out validation captions with one word masked by a seeded rule."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from support.fit_cache import cached_folder
from support.hf_encoders import CONFIGS, fast_tokenizer, trained_tokenizer
from viz_model.config.data_root import data_root

STEPS, BATCH, LEARNING_RATE, LONGEST, VOCAB, MASKED = 150, 32, 3e-3, 32, 800, 0.3
HELD_OUT, TOKENIZER_LINES = 200, 10_000
WIDE = {"max_position_embeddings": 128, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
FITTED = {  # settings unlike those of support.hf_encoders.CONFIGS: sizes, heads, activations, positions
    "bert": {**WIDE, "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 6,
             "hidden_act": "gelu_new", "layer_norm_eps": 1e-6},
    "roberta": {**WIDE, "hidden_size": 40, "intermediate_size": 80, "num_hidden_layers": 2, "num_attention_heads": 5,
                "hidden_act": "relu", "layer_norm_eps": 1e-5, "pad_token_id": 1, "type_vocab_size": 1,
                "max_position_embeddings": 130},
    "xlm-roberta": {**WIDE, "hidden_size": 48, "intermediate_size": 64, "num_hidden_layers": 3,
                    "num_attention_heads": 4, "hidden_act": "silu", "pad_token_id": 1, "type_vocab_size": 1,
                    "max_position_embeddings": 130},
    "distilbert": {"dim": 48, "hidden_dim": 96, "n_layers": 2, "n_heads": 3, "activation": "relu",
                   "max_position_embeddings": 128, "dropout": 0.0, "attention_dropout": 0.0},
    "electra": {**WIDE, "hidden_size": 48, "embedding_size": 32, "intermediate_size": 96, "num_hidden_layers": 2,
                "num_attention_heads": 4, "type_vocab_size": 3},
    "albert": {**WIDE, "hidden_size": 48, "embedding_size": 24, "intermediate_size": 96, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_hidden_groups": 2, "hidden_act": "gelu", "classifier_dropout_prob": 0.0},
    "modernbert": {"hidden_size": 48, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                   "global_attn_every_n_layers": 3, "local_attention": 10, "global_rope_theta": 5000.0,
                   "local_rope_theta": 100.0, "max_position_embeddings": 128, "hidden_activation": "gelu",
                   "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3, "cls_token_id": 2, "sep_token_id": 3},
    "deberta-v3": {**WIDE, "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2,
                   "num_attention_heads": 4, "relative_attention": True, "position_biased_input": False,
                   "pos_att_type": ["p2c", "c2p"], "position_buckets": 32, "share_att_key": True,
                   "norm_rel_ebd": "layer_norm", "legacy": False},
    "deberta-v2": {**WIDE, "hidden_size": 40, "intermediate_size": 80, "num_hidden_layers": 2,
                   "num_attention_heads": 5, "relative_attention": True, "pos_att_type": ["c2p"],
                   "max_relative_positions": 20, "type_vocab_size": 0, "conv_kernel_size": 5, "conv_act": "tanh",
                   "embedding_size": 24, "hidden_act": "gelu"},
}


def captions(split: str) -> list[str]:
    """The English captions of Multi30K's `split` under the data root; the test skips where they are not there."""
    import pytest

    path = data_root() / "multi30k" / f"{split}.en.gz"
    if not path.is_file():
        pytest.skip(f"needs the Multi30K English captions ({path.name} under the data root's multi30k folder)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def held_out(mask: str) -> list[tuple[str, str]]:
    """The first `HELD_OUT` validation captions, each with one word (chosen by a generator seeded with its index)
    replaced by `mask`, the punctuation after it kept: (the masked caption, the word)."""
    out = []
    for i, caption in enumerate(captions("val")[:HELD_OUT]):
        words = caption.split()
        j = random.Random(i).randrange(len(words))
        word = words[j].rstrip(".,!?;:")
        words[j] = mask + words[j][len(word):]
        out.append((" ".join(words), word))
    return out


def fit(model, tokenizer, lines: list[str], seed: int) -> None:
    """`STEPS` AdamW steps of the masked-LM objective on batches of `lines`, a share `MASKED` of the ordinary tokens
    masked."""
    import torch

    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, foreach=True)
    specials = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    model.train()
    for _ in range(STEPS):
        batch = tokenizer(rng.sample(lines, BATCH), padding=True, truncation=True, max_length=LONGEST,
                          return_tensors="pt")
        ids = batch["input_ids"].clone()
        chosen = (torch.rand(ids.shape, generator=generator) < MASKED) & ~torch.isin(ids, specials)
        labels = torch.where(chosen, ids, torch.full_like(ids, -100))
        ids[chosen] = tokenizer.mask_token_id
        loss = model(**{**batch, "input_ids": ids}, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def fitted_folder(cache: Path, name: str, seed: int = 0) -> Path:
    """The folder of family `name` (one of FITTED) fitted by `fit`, cached under `cache` by what makes it
    (support.fit_cache)."""
    import torch
    import transformers

    def make(folder: Path) -> None:
        config_class, model_class, kind, _ = CONFIGS[name]
        lines = captions("train")
        tokenizer = fast_tokenizer(name, kind, trained_tokenizer(kind, lines[:TOKENIZER_LINES], VOCAB))
        config = getattr(transformers, config_class)(vocab_size=len(tokenizer), **FITTED[name])
        torch.manual_seed(seed)
        model = getattr(transformers, model_class)(config)
        fit(model, tokenizer, lines, seed)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    recipe = [FITTED[name], STEPS, BATCH, LEARNING_RATE, LONGEST, VOCAB, MASKED, seed]
    return cached_folder(cache, name, recipe, make, code=("support/fitted_encoders.py", "support/hf_encoders.py"))
