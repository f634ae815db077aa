"""Shared fixtures: a generated toy English->German corpus, a tiny BPE tokenizer and tiny model directories.

Nothing here reads ../shared/data: every fixture is built from text generated below, so the whole suite
runs on a laptop CPU in well under a few minutes. Models are tiny (d_model 32, 2+2 layers, 4 heads).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import viz_model
from viz_model.batching import pad
from viz_model.checkpoint import save_model_dir
from viz_model.config import ModelConfig, TrainConfig
from viz_model.model import Transformer
from viz_model.tokenizer import BOS_ID, EOS_ID, train_tokenizer
from viz_model.train.loop import train

# The machine running the suite may be busy: one intra-op thread is both faster and deterministic here.
torch.set_num_threads(1)

SUBJECTS = [("a man", "ein Mann"), ("a woman", "eine Frau"), ("two dogs", "zwei Hunde"), ("the child", "das Kind"),
            ("a girl", "ein Mädchen"), ("three people", "drei Leute"), ("an old man", "ein alter Mann"),
            ("the boy", "der Junge"), ("a young woman", "eine junge Frau"), ("the cat", "die Katze")]
VERBS = [("is playing", "spielt"), ("is running", "läuft"), ("is sitting", "sitzt"), ("is standing", "steht"),
         ("is walking", "geht"), ("is jumping", "springt"), ("is waiting", "wartet")]
PLACES = [("in the snow", "im Schnee"), ("on the beach", "am Strand"), ("in the park", "im Park"),
          ("on the street", "auf der Straße"), ("near the water", "am Wasser"), ("in a red car", "in einem roten Auto"),
          ("with a ball", "mit einem Ball"), ("in front of a house", "vor einem Haus")]

TINY_MODEL = {"encoder_layers": 2, "decoder_layers": 2, "d_model": 32, "heads": 4, "d_ff": 64, "dropout": 0.1,
              "max_positions": 64}


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (English, German) sentence pairs from a tiny grammar, deterministic in `seed`."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        (s_en, s_de), (v_en, v_de), (p_en, p_de) = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(PLACES)
        en, de = f"{s_en} {v_en} {p_en}.", f"{s_de} {v_de} {p_de}."
        pairs.append((en[0].upper() + en[1:], de[0].upper() + de[1:]))
    return pairs


def write_lines(path: Path, lines: list[str]) -> Path:
    """Write `lines` as UTF-8 text, gzip'ed when the name ends in .gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(line + "\n" for line in lines)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_split(directory: Path, prefix: str, pairs: list[tuple[str, str]], suffix: str = ".gz") -> None:
    write_lines(directory / f"{prefix}.en{suffix}", [en for en, _ in pairs])
    write_lines(directory / f"{prefix}.de{suffix}", [de for _, de in pairs])


@pytest.fixture(scope="session")
def corpus() -> list[tuple[str, str]]:
    return make_pairs(300, seed=0)


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.model"
    return train_tokenizer([en for en, _ in corpus] + [de for _, de in corpus], path, vocab_size=160)


@pytest.fixture(scope="session")
def tiny_config(tokenizer) -> ModelConfig:
    return ModelConfig(vocab_size=tokenizer.vocab_size, **TINY_MODEL)


def random_model(cfg: ModelConfig, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(cfg).eval()


@pytest.fixture(scope="session")
def random_net(tiny_config) -> Transformer:
    """A tiny randomly initialised network (eval mode). Do not modify it in tests."""
    return random_model(tiny_config)


def train_briefly(cfg: ModelConfig, tokenizer, corpus, steps: int = 100) -> Transformer:
    """A few Adam steps of teacher forcing on `corpus` (enough to learn to stop with </s>), eval mode."""
    torch.manual_seed(1)
    net = Transformer(cfg)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3, betas=(0.9, 0.98))
    src_ids = [tokenizer.encode(en) + [EOS_ID] for en, _ in corpus]
    tgt_ids = [tokenizer.encode(de) for _, de in corpus]
    net.train()
    for step in range(steps):
        rows = [(step * 16 + i) % len(corpus) for i in range(16)]
        src = pad([src_ids[r] for r in rows])
        tgt_in = pad([[BOS_ID] + tgt_ids[r] for r in rows])
        tgt_out = pad([tgt_ids[r] + [EOS_ID] for r in rows])
        logits = net(src, tgt_in).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return net.eval()


@pytest.fixture(scope="session")
def trained_net(tiny_config, tokenizer, corpus) -> Transformer:
    """The tiny network after 100 Adam steps on the toy corpus: it ends its outputs with </s>, unlike a random one."""
    return train_briefly(tiny_config, tokenizer, corpus)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, trained_net, tokenizer) -> Path:
    """A complete model directory (weights, config, tokenizer, card) of the briefly trained tiny model."""
    return save_model_dir(trained_net, tokenizer, tmp_path_factory.mktemp("models") / "tiny-en-de",
                          card="# tiny-en-de\n\nA tiny test model.\n")


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory, random_net, tokenizer) -> Path:
    return save_model_dir(random_net, tokenizer, tmp_path_factory.mktemp("models") / "tiny-random")


@pytest.fixture(scope="session")
def tiny_model(model_dir) -> viz_model.TranslationModel:
    """The briefly trained tiny model, loaded through the public API (shared: tests must not modify it)."""
    return viz_model.load(model_dir, device="cpu")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """A Multi30k-shaped data directory: train/val/test splits as small parallel .gz files."""
    directory = tmp_path_factory.mktemp("data")
    write_split(directory, "train", make_pairs(200, seed=1))
    write_split(directory, "val", make_pairs(6, seed=2))
    write_split(directory, "test_2016_flickr", make_pairs(4, seed=3))
    return directory


def tiny_train_config(data_dir: Path, **overrides) -> TrainConfig:
    """A TrainConfig that trains the tiny model for 2 short epochs on the fixture data, on one CPU thread."""
    model = {**TINY_MODEL, "vocab_size": 120, **overrides.pop("model", {})}
    values = {"model": model, "data_dir": str(data_dir), "vocab_size": 120, "max_len": 64, "batch_tokens": 250,
              "epochs": 2, "warmup_steps": 10, "lr_peak": 3e-3, "checkpoint_every_steps": 4,
              "keep_epoch_checkpoints": 2, "average_last": 2, "eval_bleu_sentences": 2,
              "test_prefixes": ("test_2016_flickr",), "threads": 1, "device": "cpu", "bf16": False}
    values.update(overrides)
    return TrainConfig(**values)


def write_toml(path: Path, cfg: TrainConfig) -> None:
    """`cfg` as the TOML file `viz-model train --config` reads."""
    def value(v):
        return json.dumps(list(v) if isinstance(v, tuple) else v)

    data = cfg.to_dict()
    model = data.pop("model")
    lines = [f"{k} = {value(v)}" for k, v in data.items()] + ["", "[model]"]
    lines += [f"{k} = {value(v)}" for k, v in model.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, data_dir) -> Path:
    """A complete tiny training run directory (2 epochs), shared: tests copy it before changing anything."""
    run_dir = tmp_path_factory.mktemp("runs") / "finished"
    train(tiny_train_config(data_dir), run_dir)
    return run_dir


# --- the app's tiny model (tests/test_app*.py) ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A tiny model directory under a fresh assets folder, shared by a test module."""
    from test_app_support import build_tiny_assets

    return build_tiny_assets(tmp_path_factory.mktemp("app-assets"))


@pytest.fixture
def tiny(assets, monkeypatch):
    """Point the app at the tiny assets folder."""
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(assets))
    return assets


@pytest.fixture(scope="module")
def app_model(assets) -> viz_model.TranslationModel:
    """The app's tiny model, loaded on the CPU."""
    from test_app_support import TINY_MODEL

    return viz_model.load(assets / TINY_MODEL, device="cpu")


@pytest.fixture(scope="module")
def app_trace(app_model):
    """A greedy trace of a short sentence by the app's tiny model."""
    return app_model.trace("Two dogs play in the snow.", beam=1)
