"""Model directories: lossless save/load, and a CheckpointError naming the file for every kind of damage."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import pickle
import random
import resource
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from support.data import assert_loads_as_built, random_model

import viz_model
from viz_model.config import ModelConfig
from viz_model.modeldir import checkpoint
from viz_model.modeldir.checkpoint import (
    CARD,
    CONFIG,
    TOKENIZER,
    WEIGHTS,
    CheckpointError,
    atomic_write_bytes,
    load_model_dir,
    load_weights,
    read_card,
    save_model_dir,
    state_dict_for_saving,
)
from viz_model.nn.model import Transformer
from viz_model.tokenization.tokenizer import Tokenizer, TokenizerError, train_tokenizer

REPO = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("text, match", [
    ("{broken", "not valid JSON"), ('{"d_model": 32, "hedas": 4}', "hedas"),
    ('{"d_model": 30, "heads": 4}', "divisible"),
    ('{"d_model": "32", "heads": 4}', "d_model must be an integer"), ('{"heads": 4.0}', "heads must be an integer"),
    ('{"share_embeddings": "yes"}', "share_embeddings must be true or false"), ('{"dropout": NaN}', "finite"),
    ('{"positional": ["sinusoidal"]}', "positional must be one of"), ("[32, 4]", "expected a mapping"),
    ('{"d_model": 1' + "0" * 5000 + "}", "not valid JSON"),  # more digits than Python turns into an int
    ("[" * 100_000, "not valid JSON"),  # nesting too deep for the JSON parser
    (" " * (1024**2 + 1) + "{}", "more than the"),  # a megabyte-sized config.json is refused unread
    (b"\xff\xfe{}", "not valid JSON"),  # not UTF-8
], ids=lambda value: repr(value)[:24])
def test_bad_config_file(copy_dir, text, match):
    (copy_dir / CONFIG).write_bytes(text if isinstance(text, bytes) else text.encode())
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


# --- tampered files (issue 8): damage is refused before it costs memory, and never loads silently ------------------
def flip_bit(data: bytes, position: int, bit: int) -> bytes:
    out = bytearray(data)
    out[position] ^= 1 << bit
    return bytes(out)


def test_the_planned_model_on_the_meta_device_matches_the_saved_tensors(random_net, tiny_config):
    shapes, needed = checkpoint.planned_model(tiny_config)
    assert shapes == {name: tuple(t.shape) for name, t in state_dict_for_saving(random_net).items()}
    tensors = [*random_net.parameters(), *random_net.buffers()]
    assert needed == sum(t.numel() * t.element_size() for t in tensors)


def test_saved_weights_record_the_digests_of_weights_tokenizer_and_config(random_model_dir, random_net):
    with safe_open(str(random_model_dir / WEIGHTS), framework="pt") as f:
        metadata = f.metadata()
    assert metadata[checkpoint.WEIGHTS_DIGEST] == checkpoint.tensors_digest(state_dict_for_saving(random_net))
    assert metadata[checkpoint.TOKENIZER_DIGEST] == hashlib.sha256((random_model_dir / TOKENIZER).read_bytes()
                                                                   ).hexdigest()
    assert metadata[checkpoint.CONFIG_DIGEST] == checkpoint.config_digest(random_net.config)


def test_every_flipped_bit_in_the_weights_is_refused_or_harmless(copy_dir, random_net):
    """Bits flipped in the length prefix, the JSON header and the tensor data: a CheckpointError naming the file, or
    (only for a few header bytes, such as the "format" value) exactly the original weights. Never other weights."""
    path = copy_dir / WEIGHTS
    original = path.read_bytes()
    header_end = 8 + int.from_bytes(original[:8], "little")
    rng = random.Random(8)
    positions = [*range(8), *rng.sample(range(8, header_end), 30), *rng.sample(range(header_end, len(original)), 30)]
    harmless = []
    for position in positions:
        path.write_bytes(flip_bit(original, position, rng.randrange(8)))
        try:
            model, _, _ = load_model_dir(copy_dir)
        except CheckpointError as err:
            assert str(path) in str(err)
            continue
        assert position < header_end, f"a flipped bit in the tensor data (byte {position}) was not noticed"
        assert_same_weights(model, random_net)
        harmless.append(position)
    assert len(harmless) <= 6, harmless


@pytest.mark.parametrize("name", [TOKENIZER, CONFIG])
def test_a_changed_tokenizer_or_config_is_refused(copy_dir, name):
    path = copy_dir / name
    if name == CONFIG:  # a valid config, one value off: only the recorded digest can tell
        rewrite_config(copy_dir, max_positions=json.loads(path.read_text())["max_positions"] - 1)
    else:  # one bit of a piece's text: the first such flip that still loads as a SentencePiece model
        data = path.read_bytes()
        start = data.index("▁Mann".encode())
        candidates = (flip_bit(data, i, bit) for i in range(start + 3, start + 7) for bit in range(5))
        path.write_bytes(next(c for c in candidates if loads_as_tokenizer(c, copy_dir.parent / "probe.model")))
    with pytest.raises(CheckpointError, match="saved with") as err:
        load_model_dir(copy_dir)
    assert str(path) in str(err.value)


def loads_as_tokenizer(data: bytes, path) -> bool:
    path.write_bytes(data)
    try:
        Tokenizer.load(path)
    except TokenizerError:
        return False
    return True


def test_a_tokenizer_from_another_model_with_the_same_vocabulary_size(copy_dir, tmp_path, tokenizer, corpus):
    other = train_tokenizer([en.upper() for en, _ in corpus] + [de.upper() for _, de in corpus],
                            tmp_path / "other.model", vocab_size=tokenizer.vocab_size)
    assert other.vocab_size == tokenizer.vocab_size and other.serialized() != tokenizer.serialized()
    (copy_dir / TOKENIZER).write_bytes(other.serialized())
    with pytest.raises(CheckpointError, match="another model") as err:
        load_model_dir(copy_dir)
    assert str(copy_dir / TOKENIZER) in str(err.value)


@pytest.mark.parametrize("kind", ["bad values", "bad digest"])
def test_a_refused_weights_file_leaves_the_model_as_it_was(tmp_path, random_net, tiny_config, kind):
    path = tmp_path / "w.safetensors"
    checkpoint.save_weights(random_net, path)
    if kind == "bad values":  # NaN in the tensor read last: every other tensor passed its checks first
        tensors = load_file(str(path))
        last = sorted(tensors)[-1]
        tensors[last] = torch.full_like(tensors[last], float("nan"))
        save_file(tensors, str(path))
    else:
        data = path.read_bytes()
        path.write_bytes(flip_bit(data, len(data) - 1, 0))
    model = random_model(tiny_config, seed=5)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    with pytest.raises(CheckpointError, match="NaN" if kind == "bad values" else "digest"):
        load_weights(model, path)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


@pytest.mark.parametrize("changes, match", [
    ({"vocab_size": 1_000_000, "d_model": 16_384, "d_ff": 65_536}, "GiB"),  # ~64 GiB of embeddings alone
    ({"d_model": 512, "d_ff": 2048, "encoder_layers": 6}, "do not match"),  # fits in memory, not these weights
])
def test_a_config_that_does_not_fit_is_refused_before_the_model_is_allocated(copy_dir, monkeypatch, changes, match):
    built = []

    class Spy(Transformer):
        def __init__(self, cfg: ModelConfig) -> None:
            built.append(torch.empty(0).device.type)  # the default device the model is built on
            super().__init__(cfg)

    monkeypatch.setattr(checkpoint, "Transformer", Spy)
    rewrite_config(copy_dir, **changes)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CheckpointError, match=match) as err:
        load_model_dir(copy_dir)
    assert str(copy_dir) in str(err.value)
    assert built == ["meta"]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_kb < 200 * 1024


@pytest.mark.parametrize("name", [WEIGHTS, CONFIG, TOKENIZER, CARD])
def test_a_file_linking_outside_the_model_directory_is_refused(copy_dir, tmp_path, name):
    if name == CARD:
        (copy_dir / CARD).write_text("# a card\n")
    outside = tmp_path / "elsewhere" / name
    outside.parent.mkdir()
    shutil.move(copy_dir / name, outside)
    (copy_dir / name).symlink_to(outside)
    with pytest.raises(CheckpointError, match="outside the model directory") as err:
        viz_model.load(copy_dir, device="cpu")
    assert str(copy_dir / name) in str(err.value)


def test_links_inside_the_model_directory_are_followed(copy_dir, random_net):
    (copy_dir / "blobs").mkdir()
    shutil.move(copy_dir / WEIGHTS, copy_dir / "blobs" / "weights.bin")
    (copy_dir / WEIGHTS).symlink_to(os.path.join("blobs", "weights.bin"))
    model, _, _ = load_model_dir(copy_dir)
    assert_same_weights(model, random_net)


def test_a_symlink_loop_is_a_clear_error(copy_dir):
    (copy_dir / WEIGHTS).unlink()
    (copy_dir / WEIGHTS).symlink_to(WEIGHTS)
    with pytest.raises(CheckpointError, match=WEIGHTS):
        load_model_dir(copy_dir)


def test_loading_never_unpickles(model_dir, monkeypatch):
    """Only safetensors, JSON and SentencePiece are read: torch.load and pickle are never called on the way."""
    def refuse(*args, **kwargs):
        raise AssertionError("the load path unpickled something")

    for module, name in ((torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")):
        monkeypatch.setattr(module, name, refuse)
    model = viz_model.load(model_dir, device="cpu")
    assert isinstance(model.translate("A man is running.", beam=2), str)
    for module in (checkpoint, viz_model.api, viz_model.kinds.translator, viz_model.kinds.language_model,
                   viz_model.config, viz_model.tokenization.tokenizer):
        source = inspect.getsource(module)
        assert "torch.load(" not in source and "pickle" not in source.replace("no pickle", ""), module.__name__


@pytest.mark.parametrize("which", ["random", "shipped"])
def test_loading_fills_a_model_built_without_random_weights(which, random_model_dir):
    """`load_model_dir` builds the model on the meta device (no random init: ~1 s for 74M parameters) and fills
    it: every parameter and buffer equals the model built and initialised first, then loaded."""
    shipped = viz_model.modeldir.shipped.ASSETS_DIR / "multi30k-en-de"
    assert_loads_as_built(random_model_dir if which == "random" else shipped)


@pytest.mark.parametrize("where", [0, 9, 10, 19, 24])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_bad_value_is_found_in_any_block_of_the_read(tiny_model, tmp_path, monkeypatch, where, bad):
    """Loading checks the weights a block at a time (READ_BLOCK bytes): a bad value at a block's edge or in the
    last, short block of a tensor is found, and the model keeps its weights."""
    import viz_model.modeldir.checkpoint as checkpoint

    network = tiny_model.network
    name = "encoder_layers.0.ffn.w_1.bias"
    tensors = checkpoint.state_dict_for_saving(network)
    tensors[name] = tensors[name].clone()
    tensors[name][where] = bad
    path = tmp_path / "w.safetensors"
    save_file(tensors, str(path))
    monkeypatch.setattr(checkpoint, "READ_BLOCK", 10 * 4)  # blocks of 10 float32 values
    before = {k: v.clone() for k, v in network.state_dict().items()}
    with pytest.raises(CheckpointError, match=f"{name} contains NaN or infinite values"):
        checkpoint.load_weights(network, path)
    assert all(torch.equal(before[k], v) for k, v in network.state_dict().items())


def test_a_cards_figure_markers_are_not_read_as_its_text(tmp_path):
    """The markers naming each figure's file (for the figure check) stay in the file, not in what a reader sees."""
    (tmp_path / CARD).write_text("wall time 2.50<!-- fig training_log.jsonl *.wall_time max /3600 .2f --> h on "
                                 "<!-- machine bench_trace_mixed.json -->2-core X, 2026-11-26<!-- /machine -->.\n"
                                 "<!-- a comment the author wrote -->\n")
    assert read_card(tmp_path) == "wall time 2.50 h on 2-core X, 2026-11-26.\n<!-- a comment the author wrote -->\n"


def test_the_shipped_cards_carry_markers_and_read_without_them():
    shipped = sorted(p.parent for p in (REPO / "assets").glob("*/MODEL_CARD.md"))
    assert shipped
    for directory in shipped:
        assert "<!-- fig " in (directory / CARD).read_text(), directory.name
        assert "<!-- fig " not in read_card(directory) and read_card(directory).startswith("# Model card")
