"""Tampered model directories and hostile model names in the app (Streamlit AppTest): each gives a clear message
naming the problem, and the app keeps serving the other models. The library side is in test_checkpoint.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.app import (  # noqa: E402
    TINY_MODEL,  # noqa: E402
    charts,
    messages,
    ok,
    start,
)

from app import sessions  # noqa: E402
from viz_model.modeldir.checkpoint import CONFIG, TOKENIZER, WEIGHTS, CheckpointError  # noqa: E402

Damage = Callable[[Path], None]


def _truncate(directory: Path) -> None:
    data = (directory / WEIGHTS).read_bytes()
    (directory / WEIGHTS).write_bytes(data[:len(data) // 2])


def _flip_last_bit(directory: Path) -> None:
    data = bytearray((directory / WEIGHTS).read_bytes())
    data[-1] ^= 1
    (directory / WEIGHTS).write_bytes(bytes(data))


def _config(**changes) -> Damage:
    def damage(directory: Path) -> None:
        config = json.loads((directory / CONFIG).read_text())
        (directory / CONFIG).write_text(json.dumps({**config, **changes}))
    return damage


def _foreign_tokenizer(tokenizer) -> Damage:
    def damage(directory: Path) -> None:
        (directory / TOKENIZER).write_bytes(tokenizer.serialized())
    return damage


def _linked_weights(directory: Path) -> None:
    outside = directory.parent.parent / f"outside-{directory.name}.safetensors"
    shutil.move(directory / WEIGHTS, outside)
    (directory / WEIGHTS).symlink_to(outside)


BROKEN = {  # name -> (damage, what the message must say)
    "zz-truncated": (_truncate, "truncated or corrupt"),
    "zz-bit-flip": (_flip_last_bit, "SHA-256 digest"),
    "zz-huge-config": (_config(vocab_size=1_000_000, d_model=16_384, d_ff=65_536), "GiB"),
    "zz-wrong-types": (_config(d_model="32"), "d_model must be an integer"),
    "zz-foreign-tokenizer": (None, TOKENIZER),
    "zz-linked-weights": (_linked_weights, "outside the model directory"),
}


@pytest.fixture(scope="module")
def mixed_assets(tmp_path_factory, assets, tokenizer):
    """An assets root with the good tiny model, one damaged copy per kind of damage and a symlinked directory."""
    root = tmp_path_factory.mktemp("mixed") / "assets"
    root.mkdir()
    shutil.copytree(assets / TINY_MODEL, root / TINY_MODEL)
    for name, (damage, _) in BROKEN.items():
        shutil.copytree(assets / TINY_MODEL, root / name)
        (damage or _foreign_tokenizer(tokenizer))(root / name)
    shutil.copytree(assets / TINY_MODEL, root.parent / "elsewhere")
    (root / "zz-symlinked-dir").symlink_to(root.parent / "elsewhere", target_is_directory=True)
    return root


@pytest.fixture
def mixed(mixed_assets, monkeypatch):
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(mixed_assets))
    return mixed_assets


def sidebar_errors(at) -> str:
    return "\n".join(e.value for e in at.sidebar.error)


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_damaged_model_is_a_message_and_the_others_keep_serving(mixed, name):
    at = ok(start(model=name))
    assert at.sidebar.selectbox(key="w_model").value == name
    text = sidebar_errors(at)
    assert "cannot be loaded" in text and BROKEN[name][1] in text and name in text
    assert charts(at) == [] and "No model is loaded" in messages(at)
    at.sidebar.selectbox(key="w_model").set_value(TINY_MODEL).run()
    ok(at)
    assert sidebar_errors(at) == ""
    assert [c["layout"]["title"]["text"] for c in charts(at)] == ["Encoder self-attention: layer 1, head 1"]


def test_the_model_picker_lists_real_directories_only(mixed):
    options = [o.rsplit(" (", 1)[0] for o in ok(start()).sidebar.selectbox(key="w_model").options]  # name (pair)
    assert sorted(options) == sorted([TINY_MODEL, *BROKEN])  # damaged ones are listed (and explained when picked)
    assert "zz-symlinked-dir" not in options


@pytest.mark.parametrize("value", [f"../assets/{TINY_MODEL}", "..", ".", "", "/etc", f"{TINY_MODEL}/../zz-truncated",
                                   f"{TINY_MODEL}/", "zz-symlinked-dir", "%2e%2e%2fetc", "~", "x" * 5000],
                         ids=lambda v: v[:30])
def test_a_model_path_in_the_url_only_ever_names_a_directory_of_the_assets_root(mixed, value):
    at = ok(start(model=value))
    assert "model=" in messages(at) and "no such model" in messages(at)
    assert at.sidebar.selectbox(key="w_model").value == TINY_MODEL
    assert charts(at) and sidebar_errors(at) == ""


@pytest.mark.parametrize("name", ["../assets/" + TINY_MODEL, "..", ".", "", "zz-symlinked-dir", "/etc",
                                  TINY_MODEL + "/"])
def test_loading_refuses_any_name_that_is_not_a_listed_directory(mixed, name):
    with pytest.raises(CheckpointError, match="no model directory named"):
        sessions.load_model(sessions.ModelRef(str(mixed), name, "0.0"))
