"""Tiny corpora, data directories, training configs and the one tiny-model factory."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import torch
import torch.nn.functional as F

from viz_model.config import ModelConfig, TrainConfig
from viz_model.data.batching import pad
from viz_model.modeldir.checkpoint import WEIGHTS, load_model_dir, load_weights
from viz_model.nn.model import Transformer
from viz_model.tokenization.tokenizer import BOS_ID, EOS_ID

SUBJECTS = [("a man", "ein Mann"), ("a woman", "eine Frau"), ("two dogs", "zwei Hunde"), ("the child", "das Kind"),
            ("a girl", "ein Mädchen"), ("three people", "drei Leute"), ("an old man", "ein alter Mann"),
            ("the boy", "der Junge"), ("a young woman", "eine junge Frau"), ("the cat", "die Katze")]


VERBS = [("is playing", "spielt"), ("is running", "läuft"), ("is sitting", "sitzt"), ("is standing", "steht"),
         ("is walking", "geht"), ("is jumping", "springt"), ("is waiting", "wartet")]


PLACES = [("in the snow", "im Schnee"), ("on the beach", "am Strand"), ("in the park", "im Park"),
          ("on the street", "auf der Straße"), ("near the water", "am Wasser"), ("in a red car", "in einem roten Auto"),
          ("with a ball", "mit einem Ball"), ("in front of a house", "vor einem Haus")]


TINY_ARCHITECTURE = {"encoder_layers": 2, "decoder_layers": 2, "d_model": 32, "heads": 4, "d_ff": 64, "dropout": 0.1,
              "max_positions": 64}


def tiny_model_config(vocab_size: int, **changes) -> ModelConfig:
    """The one tiny model of the tests (2 + 2 layers, d_model 32, 4 heads, d_ff 64); `changes` adjust it."""
    return ModelConfig(vocab_size=vocab_size, **{**TINY_ARCHITECTURE, **changes})


def step_by_step_logits(model: Transformer, encoded, tgt: torch.Tensor) -> torch.Tensor:
    """The logits of decoding `tgt` one token at a time with the key/value cache, ``(batch, tgt_len, vocab)``."""
    cache, steps = None, []
    for i in range(tgt.shape[1]):
        out = model.decode(tgt[:, i:i + 1], encoded, cache=cache, offset=i)
        cache, steps = out.cache, steps + [model.logits(out.hidden)]
    return torch.cat(steps, 1)


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


def write_corpus(directory: Path, pairs: list[tuple[str, str]], source: str = "src.en.gz",
                 reference: str = "ref.de") -> tuple[Path, Path]:
    """The sources and the references of `pairs` as two files of `directory` (`write_lines`)."""
    return (write_lines(directory / source, [en for en, _ in pairs]),
            write_lines(directory / reference, [de for _, de in pairs]))


def write_split(directory: Path, prefix: str, pairs: list[tuple[str, str]], suffix: str = ".gz") -> None:
    write_lines(directory / f"{prefix}.en{suffix}", [en for en, _ in pairs])
    write_lines(directory / f"{prefix}.de{suffix}", [de for _, de in pairs])


def random_model(cfg: ModelConfig, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(cfg).eval()


def train_briefly(cfg: ModelConfig, tokenizer, corpus, steps: int = 100) -> Transformer:
    """A few Adam steps of teacher forcing on `corpus` (enough to learn to stop with </s>), eval mode."""
    torch.manual_seed(1)
    net = Transformer(cfg)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3, betas=(0.9, 0.98), foreach=True)
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


def tiny_train_config(data_dir: Path, **overrides) -> TrainConfig:
    """A TrainConfig that trains the tiny model for 2 short epochs on the fixture data, on one CPU thread."""
    model = {**TINY_ARCHITECTURE, "vocab_size": 120, **overrides.pop("model", {})}
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


def assert_loads_as_built(directory: Path) -> None:
    """`load_model_dir` (weights into a model built on the meta device) gives, tensor for tensor, the model built the
    slow way (random init, then `load_weights`): parameters, saved buffers and the recomputed ones (PE tables,
    never-emitted ids) alike."""
    loaded, _, config = load_model_dir(directory)
    built = Transformer(config)
    load_weights(built, directory / WEIGHTS)
    ours = {**dict(loaded.named_parameters()), **dict(loaded.named_buffers())}
    reference = {**dict(built.named_parameters()), **dict(built.named_buffers())}
    assert ours.keys() == reference.keys()
    different = [name for name in ours if not torch.equal(ours[name], reference[name])]
    assert not different, f"differ from the slowly built model: {different}"
    assert all(t.device.type == "cpu" and not t.is_meta for t in ours.values())
    assert loaded.src_embedding.weight is loaded.tgt_embedding.weight or not config.share_embeddings
