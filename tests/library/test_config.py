"""ModelConfig / TrainConfig: validation, unknown keys, TOML files and command-line overrides."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from viz_model.config import ConfigError, ModelConfig, TrainConfig, apply_override

REPO = Path(__file__).resolve().parents[2]


def test_defaults_are_the_paper_base_model():
    cfg = ModelConfig()
    assert (cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.heads, cfg.d_ff) == (6, 6, 512, 8, 2048)
    assert (cfg.dropout, cfg.positional, cfg.norm, cfg.share_embeddings) == (0.1, "sinusoidal", "post", True)
    assert cfg.d_head == 64
    train = TrainConfig()
    assert (train.adam_beta1, train.adam_beta2, train.adam_eps) == (0.9, 0.98, 1e-9)
    assert (train.label_smoothing, train.warmup_steps, train.average_last) == (0.1, 4000, 5)


def test_unknown_key_names_it_and_suggests_the_closest():
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict({"d_modle": 64, "heads": 4})
    assert "'d_modle'" in str(err.value) and "did you mean 'd_model'" in str(err.value)
    with pytest.raises(ConfigError, match="did you mean 'warmup_steps'"):
        TrainConfig.from_dict({"warmup_step": 10})
    with pytest.raises(ConfigError, match="'zzz'"):
        TrainConfig.from_dict({"model": {"zzz": 1}})


@pytest.mark.parametrize("key, value, match", [
    ("d_model", "512", "d_model must be an integer"),
    ("heads", 8.0, "heads must be an integer"),
    ("encoder_layers", True, "encoder_layers must be an integer"),
    ("encoder_layers", 0, r"encoder_layers must be in \[1"),
    ("dropout", "0.1", "dropout must be a finite number"),
    ("dropout", float("nan"), "dropout must be a finite number"),
    ("dropout", 1.5, "dropout must be in"),
    ("positional", "rotary", "positional must be one of sinusoidal, learned"),
    ("norm", "sandwich", "norm must be one of post, pre"),
    ("share_embeddings", 1, "share_embeddings must be true or false"),
    ("pad_id", 37_000, "pad_id must be in"),
])
def test_model_config_rejects_wrong_types_and_values(key, value, match):
    with pytest.raises(ConfigError, match=match):
        ModelConfig(**{key: value})


def test_d_model_must_be_divisible_by_heads():
    with pytest.raises(ConfigError, match=r"d_model \(100\) must be divisible by heads \(8\)"):
        ModelConfig(d_model=100, heads=8)
    with pytest.raises(ConfigError, match="even"):
        ModelConfig(d_model=15, heads=3)
    ModelConfig(d_model=15, heads=3, positional="learned")  # learned positions allow an odd width


@pytest.mark.parametrize("values, match", [
    ({"epochs": 0, "max_steps": 0}, "train nothing"),
    ({"max_len": 300}, r"max_len \(300\) exceeds model.max_positions \(256\)"),
    ({"average_last": 6, "keep_epoch_checkpoints": 5}, "average_last"),
    ({"batch_tokens": "4000"}, "batch_tokens must be an integer"),
    ({"label_smoothing": -0.1}, "label_smoothing must be in"),
    ({"device": "tpu"}, "device must be one of"),
    ({"tokenizer_type": "wordpiece"}, "tokenizer_type"),
    ({"bf16": "yes"}, "bf16 must be true or false"),
    ({"vocab_size": 10}, "vocab_size must be in"),
    ({"epochs": 3, "cooldown_epochs": 4}, r"cooldown_epochs \(4\) exceeds epochs \(3\)"),
    ({"cooldown_epochs": 2, "max_steps": 500}, r"cooldown_epochs \(2\) counts epochs: .*max_steps \(500\)"),
    ({"cooldown_epochs": -1}, "cooldown_epochs must be in"),
])
def test_train_config_rejects_impossible_values(values, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**values)


@pytest.mark.parametrize("values, match", [
    ({"model": 5}, "model must be a table"),
    ({"model": "base"}, "model must be a table"),
    ({"data_dir": 5}, "data_dir must be a non-empty string"),
    ({"src_lang": ""}, "src_lang must be a non-empty string"),
    ({"val_prefix": None}, "val_prefix must be a non-empty string"),
    ({"test_prefixes": "test_2016"}, "test_prefixes must be a list of strings"),
    ({"test_prefixes": [1, 2]}, "test_prefixes must be a list of strings"),
])
def test_train_config_rejects_wrong_types(values, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig.from_dict(values, "run.toml")


def test_value_errors_from_a_file_name_the_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"d_model": 30, "heads": 4}))
    with pytest.raises(ConfigError, match=r"config.json: d_model \(30\) must be divisible"):
        ModelConfig.load(path)
    with pytest.raises(ConfigError, match=r"run.toml: model: d_model \(30\)"):
        TrainConfig.from_dict({"model": {"d_model": 30, "heads": 4}}, "run.toml")


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_model_config_json_round_trip(tmp_path):
    cfg = ModelConfig(vocab_size=300, d_model=32, heads=4, d_ff=64, positional="learned", norm="pre",
                      share_embeddings=False)
    cfg.save(tmp_path / "config.json")
    assert ModelConfig.load(tmp_path / "config.json") == cfg
    assert json.loads((tmp_path / "config.json").read_text())["d_model"] == 32


def test_model_config_load_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        ModelConfig.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json: not valid JSON"):
        ModelConfig.load(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a mapping"):
        ModelConfig.load(bad)
    bad.write_text(json.dumps({"vocab_size": 100, "headz": 2}))
    with pytest.raises(ConfigError, match=r"bad.json: unknown key\(s\) 'headz' \(did you mean 'heads'\?\)"):
        ModelConfig.load(bad)


TOML = """
data_dir = "data"
epochs = 3
max_len = 64
test_prefixes = ["test_a"]

[model]
vocab_size = 200
d_model = 32
heads = 4
d_ff = 64
encoder_layers = 1
decoder_layers = 1
max_positions = 64
"""


def test_toml_with_overrides(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    cfg = TrainConfig.from_toml(path)
    assert isinstance(cfg.model, ModelConfig)
    assert (cfg.epochs, cfg.model.d_model, cfg.test_prefixes, cfg.max_len) == (3, 32, ("test_a",), 64)
    cfg = TrainConfig.from_toml(path, ["epochs=5", "model.d_model=64", "model.heads=8", "data_dir=/some/where",
                                       "lr_peak=7e-4", "device=cpu", "model.norm=pre", "test_prefixes=[]"])
    assert (cfg.epochs, cfg.model.d_model, cfg.model.heads, cfg.data_dir, cfg.lr_peak, cfg.device,
            cfg.model.norm, cfg.test_prefixes) == (5, 64, 8, "/some/where", 7e-4, "cpu", "pre", ())
    assert cfg.model.vocab_size == 200  # untouched keys of the table survive


def test_toml_default_max_len_fits():
    # TrainConfig's default max_len (128) fits the default max_positions (256)
    assert TrainConfig().max_len <= TrainConfig().model.max_positions


def test_toml_errors(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    with pytest.raises(ConfigError, match="did you mean 'epochs'"):
        TrainConfig.from_toml(path, ["epoch=5"])
    with pytest.raises(ConfigError, match="divisible"):
        TrainConfig.from_toml(path, ["model.heads=5"])
    with pytest.raises(ConfigError, match="key=value"):
        TrainConfig.from_toml(path, ["epochs"])
    with pytest.raises(ConfigError, match="config file not found"):
        TrainConfig.from_toml(tmp_path / "missing.toml")
    path.write_text("epochs = = 3\n")
    with pytest.raises(ConfigError, match="run.toml: not valid TOML"):
        TrainConfig.from_toml(path)
    path.write_text('[model]\nd_model = 32\nheads = 4\nvocab_size = 100\nheds = 4\n')
    with pytest.raises(ConfigError, match="did you mean 'heads'"):
        TrainConfig.from_toml(path)


def test_apply_override_nested_and_errors():
    data: dict = {"model": {"d_model": 8}}
    apply_override(data, "model.d_model=16")
    apply_override(data, "a.b.c=true")
    apply_override(data, "name=hello world")
    assert data == {"model": {"d_model": 16}, "a": {"b": {"c": True}}, "name": "hello world"}
    with pytest.raises(ConfigError, match="not a table"):
        apply_override({"x": 1}, "x.y=2")
    with pytest.raises(ConfigError):
        apply_override({}, "=3")


def test_shipped_training_config_is_valid():
    path = REPO / "configs" / "multi30k-en-de.toml"
    if not path.is_file():
        pytest.skip("no shipped training config")
    cfg = TrainConfig.from_toml(path)
    assert cfg.model.d_model % cfg.model.heads == 0
    assert dataclasses.asdict(cfg)  # serialisable


def test_train_config_round_trips_through_json():
    cfg = TrainConfig(model=ModelConfig(vocab_size=100, d_model=16, heads=2, d_ff=32, max_positions=32), max_len=32,
                      test_prefixes=("a", "b"), epochs=2)
    again = TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg


def test_the_one_bounded_integer_check():
    """`check_int` / `is_int`: what every guard of the library calls, a bool never an integer, numpy's where asked."""
    import numpy as np

    from viz_model.config.checks import check_int, is_int

    assert check_int("n", 3, 1, 3) == 3 and type(check_int("n", np.int64(2), kinds=(int, np.integer))) is int
    assert is_int(0, 0) and not is_int(True) and not is_int(2.0) and not is_int(np.int64(2)) and not is_int(-1, 0)
    assert is_int(10**9, 1) and not is_int(5, high=4)
    for value, message in [(True, r"n must be an integer, got True \(bool\)"), ("2", "n must be an integer, got '2'"),
                           (0, r"n must be in \[1, 3\], got 0"), (4, r"n must be in \[1, 3\], got 4")]:
        with pytest.raises(ConfigError, match=message):
            check_int("n", value, 1, 3)
    with pytest.raises(ConfigError, match="n must be >= 1, got -2"):
        check_int("n", -2, 1)
    with pytest.raises(ValueError, match="^pick 1 to 3$") as raised:
        check_int("n", 9, 1, 3, error=ValueError, message="pick 1 to 3")
    assert type(raised.value) is ValueError
