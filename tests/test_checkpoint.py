"""Model directories: lossless save/load, and a CheckpointError naming the file for every kind of damage."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from viz_model import checkpoint
from viz_model.checkpoint import (
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    CheckpointError,
    atomic_write_bytes,
    load_model_dir,
    load_weights,
    save_model_dir,
    state_dict_for_saving,
)
from viz_model.config import ModelConfig
from viz_model.model import Transformer


@pytest.fixture
def copy_dir(tmp_path, random_model_dir):
    """A private copy of the random tiny model directory, free to damage."""
    return shutil.copytree(random_model_dir, tmp_path / "model")


def assert_same_weights(a: Transformer, b: Transformer) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name


def test_round_trip(random_net, random_model_dir, tokenizer):
    assert sorted(p.name for p in random_model_dir.iterdir()) == sorted([WEIGHTS, CONFIG, TOKENIZER])
    model, tok, cfg = load_model_dir(random_model_dir)
    assert cfg == random_net.config
    assert tok.serialized() == tokenizer.serialized()
    assert_same_weights(model, random_net)
    assert not model.training
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8, 9]])
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt).logits, random_net(src, tgt).logits, atol=0, rtol=0)


def test_weights_file_is_plain_safetensors_with_tied_matrix_once(random_model_dir, random_net):
    tensors = load_file(str(random_model_dir / WEIGHTS))
    assert "src_embedding.weight" in tensors and "tgt_embedding.weight" not in tensors
    assert not any("positions.table" in name for name in tensors)  # sinusoids are recomputed, not stored
    assert set(tensors) == set(state_dict_for_saving(random_net))
    assert json.loads((random_model_dir / CONFIG).read_text()) == random_net.config.to_dict()


@pytest.mark.parametrize("options", [{"share_embeddings": False}, {"positional": "learned", "norm": "pre"}])
def test_round_trip_of_variants(tmp_path, tokenizer, options):
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, encoder_layers=1, decoder_layers=2, d_model=16, heads=2,
                      d_ff=32, max_positions=32, **options)
    torch.manual_seed(3)
    net = Transformer(cfg).eval()
    save_model_dir(net, tokenizer, tmp_path / "m", card="# card\n")
    model, _, loaded_cfg = load_model_dir(tmp_path / "m")
    assert loaded_cfg == cfg
    assert_same_weights(model, net)
    assert (tmp_path / "m" / "MODEL_CARD.md").read_text() == "# card\n"


def test_half_precision_weights_load_into_float32(tmp_path, random_net, tokenizer):
    save_model_dir(random_net, tokenizer, tmp_path / "m", dtype=torch.float16)
    assert all(t.dtype == torch.float16 for t in load_file(str(tmp_path / "m" / WEIGHTS)).values())
    model, _, _ = load_model_dir(tmp_path / "m")
    for (name, p), q in zip(model.named_parameters(), random_net.parameters()):
        assert p.dtype == torch.float32
        torch.testing.assert_close(p, q, atol=2e-3, rtol=2e-3, msg=name)


def test_saving_leaves_no_temporary_files(random_model_dir):
    assert not [p for p in random_model_dir.iterdir() if p.name.startswith(".") or p.suffix == ".tmp"]


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="model directory not found"):
        load_model_dir(tmp_path / "nothing-here")


@pytest.mark.parametrize("name", [CONFIG, WEIGHTS, TOKENIZER])
def test_missing_file_is_named(copy_dir, name):
    (copy_dir / name).unlink()
    with pytest.raises(CheckpointError, match="missing file") as err:
        load_model_dir(copy_dir)
    assert str(copy_dir / name) in str(err.value)


@pytest.mark.parametrize("keep", [0, 7, 100, 0.5, -1])
def test_truncated_weights(copy_dir, keep):
    data = (copy_dir / WEIGHTS).read_bytes()
    size = int(len(data) * keep) if isinstance(keep, float) else (len(data) + keep if keep < 0 else keep)
    (copy_dir / WEIGHTS).write_bytes(data[:size])
    with pytest.raises(CheckpointError) as err:
        load_model_dir(copy_dir)
    assert str(copy_dir / WEIGHTS) in str(err.value)


def test_garbage_weights(copy_dir):
    (copy_dir / WEIGHTS).write_bytes(b"\x80\x04pickle? no thanks" * 10)
    with pytest.raises(CheckpointError, match="not a valid safetensors file") as err:
        load_model_dir(copy_dir)
    assert WEIGHTS in str(err.value)


def rewrite_config(directory, **changes) -> None:
    data = json.loads((directory / CONFIG).read_text())
    data.update(changes)
    (directory / CONFIG).write_text(json.dumps(data))


def test_wrong_shapes_when_the_config_says_another_d_model(copy_dir):
    rewrite_config(copy_dir, d_model=64, d_ff=128)
    with pytest.raises(CheckpointError, match="has shape") as err:
        load_model_dir(copy_dir)
    message = str(err.value)
    assert str(copy_dir / WEIGHTS) in message and "64" in message


def test_wrong_layer_count_names_missing_weights(copy_dir):
    data = json.loads((copy_dir / CONFIG).read_text())
    rewrite_config(copy_dir, encoder_layers=data["encoder_layers"] + 1)
    with pytest.raises(CheckpointError, match="missing") as err:
        load_model_dir(copy_dir)
    assert str(copy_dir / WEIGHTS) in str(err.value) and f"encoder_layers.{data['encoder_layers']}" in str(err.value)


def test_vocab_size_differs_from_tokenizer(copy_dir, tokenizer):
    rewrite_config(copy_dir, vocab_size=tokenizer.vocab_size + 10)
    with pytest.raises(CheckpointError, match="vocab") as err:
        load_model_dir(copy_dir)
    message = str(err.value)
    assert str(copy_dir / TOKENIZER) in message
    assert str(tokenizer.vocab_size) in message and str(tokenizer.vocab_size + 10) in message


@pytest.mark.parametrize("text, match", [("{broken", "not valid JSON"), ('{"d_model": 32, "hedas": 4}', "hedas"),
                                         ('{"d_model": 30, "heads": 4}', "divisible")])
def test_bad_config_file(copy_dir, text, match):
    (copy_dir / CONFIG).write_text(text)
    with pytest.raises(CheckpointError, match=match) as err:
        load_model_dir(copy_dir)
    assert CONFIG in str(err.value)


def test_bad_tokenizer_file(copy_dir):
    (copy_dir / TOKENIZER).write_bytes(b"not a sentencepiece model")
    with pytest.raises(CheckpointError) as err:
        load_model_dir(copy_dir)
    assert str(copy_dir / TOKENIZER) in str(err.value)


def test_non_finite_and_integer_weights_are_rejected(copy_dir):
    tensors = load_file(str(copy_dir / WEIGHTS))
    name = "encoder_layers.0.self_attn.w_q.weight"
    bad = dict(tensors)
    bad[name] = tensors[name].clone()
    bad[name][0, 0] = float("nan")
    save_file(bad, str(copy_dir / WEIGHTS))
    with pytest.raises(CheckpointError, match="NaN") as err:
        load_model_dir(copy_dir)
    assert name in str(err.value)
    bad[name] = torch.zeros_like(tensors[name], dtype=torch.int32)
    save_file(bad, str(copy_dir / WEIGHTS))
    with pytest.raises(CheckpointError, match="dtype"):
        load_model_dir(copy_dir)


def test_unexpected_weight_names(copy_dir):
    tensors = load_file(str(copy_dir / WEIGHTS))
    tensors["surprise.weight"] = torch.zeros(2)
    save_file(tensors, str(copy_dir / WEIGHTS))
    with pytest.raises(CheckpointError, match="surprise.weight"):
        load_model_dir(copy_dir)


def test_load_weights_into_a_model(tmp_path, random_net, tiny_config):
    checkpoint.save_weights(random_net, tmp_path / "w.safetensors")
    fresh = Transformer(tiny_config)
    load_weights(fresh, tmp_path / "w.safetensors")
    assert_same_weights(fresh, random_net)
    # the tied matrices are still one tensor after loading
    assert fresh.src_embedding.weight is fresh.tgt_embedding.weight
    with pytest.raises(CheckpointError, match="weights file not found"):
        load_weights(fresh, tmp_path / "none.safetensors")


def test_atomic_write_replaces_whole_files(tmp_path):
    path = tmp_path / "dir" / "file.bin"
    atomic_write_bytes(path, b"first")
    atomic_write_bytes(path, b"second")
    assert path.read_bytes() == b"second"
    assert os.listdir(path.parent) == ["file.bin"]


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_atomic_write_interrupted_keeps_the_old_file(tmp_path, monkeypatch, where):
    path = tmp_path / "latest.bin"
    atomic_write_bytes(path, b"old complete content")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of writing a checkpoint

    monkeypatch.setattr(checkpoint.os, where, crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(path, b"new content that never lands" * 1000)
    monkeypatch.undo()
    assert path.read_bytes() == b"old complete content"
    assert os.listdir(tmp_path) == ["latest.bin"]  # the temporary file is cleaned up
