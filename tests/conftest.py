"""Shared fixtures: a generated toy English->German corpus, a tiny BPE tokenizer and tiny model directories.

No fixture reads ../shared/data: every fixture is built from text generated below, so the whole suite
runs on a laptop CPU in well under a few minutes. Models are tiny (d_model 32, 2+2 layers, 4 heads).
The data root (VIZ_MODEL_DATA) is the local copy ../shared/data beside the repository where there is one and the
variable is unset; the few tests that read a real corpus skip without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from support.data import make_pairs, random_model, tiny_model_config, tiny_train_config, train_briefly, write_split
from support.parallel import (  # noqa: F401 (hooks)
    add_worker_groups,
    order_groups,
    pytest_cmdline_main,
    pytest_configure_node,
    record_group_seconds,
)
from support.training import trained_run

import viz_model
from viz_model.config import ModelConfig
from viz_model.modeldir.checkpoint import save_model_dir
from viz_model.nn.model import Transformer
from viz_model.tokenization.tokenizer import train_tokenizer

APP_PACKAGES = ("streamlit", "plotly")  # what the explorer needs beyond the library
try:  # the explorer's fixtures (one Chromium a worker): a library-only install (the GPU machine) has no Streamlit
    from support.browser import browser, page, server  # noqa: F401
except ModuleNotFoundError as missing:
    if (missing.name or "").split(".")[0] not in APP_PACKAGES:
        raise

# The machine running the suite may be busy: one intra-op thread is both faster and deterministic here, and in the
# processes tests start (the explorer's servers, CLI runs), unless OMP_NUM_THREADS says otherwise.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The explorer loads its models on the device VIZ_MODEL_DEVICE names (default: the GPU where there is one). The app
# tests compare what it shows with numbers computed here on the CPU, so the app runs on the CPU in this process;
# tests/library/test_gpu.py starts it on the GPU in a process of its own.
os.environ["VIZ_MODEL_DEVICE"] = "cpu"
LOCAL_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if LOCAL_DATA.is_dir() and not os.environ.get("VIZ_MODEL_DATA"):
    os.environ["VIZ_MODEL_DATA"] = str(LOCAL_DATA)


def pytest_runtest_setup(item) -> None:
    """Every test starts on one torch thread, as set above: CTranslate2 (tests/library/test_hf_export.py) sets the
    OpenMP thread count it shares with torch to the machine's cores, and two threads in a process beside two busy
    ones on 2 cores run about 100 times slower (three beam searches of the shipped model: 12 s instead of 0.13)."""
    torch.set_num_threads(1)


def pytest_configure(config) -> None:
    record_group_seconds(config)


@pytest.hookimpl(wrapper=True)  # around the other hooks: before pytest-xdist's worker reads the groups, after pytest's
def pytest_collection_modifyitems(config, items):  # own reordering
    """Tests marked `gpu` skip where torch sees no CUDA device; on xdist workers each test gets its group, and the
    groups run longest first."""
    add_worker_groups(config, items)
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (torch sees none)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    yield
    order_groups(config, items)


@pytest.fixture(scope="session")
def corpus() -> list[tuple[str, str]]:
    return make_pairs(300, seed=0)


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.model"
    return train_tokenizer([en for en, _ in corpus] + [de for _, de in corpus], path, vocab_size=160)


@pytest.fixture(scope="session")
def tiny_config(tokenizer) -> ModelConfig:
    return tiny_model_config(tokenizer.vocab_size)


@pytest.fixture(scope="session")
def random_net(tiny_config) -> Transformer:
    """A tiny randomly initialised network (eval mode). Do not modify it in tests."""
    return random_model(tiny_config)


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


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory, data_dir) -> Path:
    """A complete tiny training run directory (2 epochs), shared: tests copy it before changing anything."""
    return trained_run(tmp_path_factory.mktemp("runs") / "finished", tiny_train_config(data_dir))


# --- the app's tiny model (tests/app/) ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """A tiny model directory under a fresh assets folder, shared by a test module."""
    from support.app import build_tiny_assets

    return build_tiny_assets(tmp_path_factory.mktemp("app-assets"))


@pytest.fixture
def tiny(assets, monkeypatch):
    """Point the app at the tiny assets folder."""
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(assets))
    return assets


@pytest.fixture(scope="module")
def app_model(assets) -> viz_model.TranslationModel:
    """The app's tiny model, loaded on the CPU."""
    from support.app import TINY_MODEL

    return viz_model.load(assets / TINY_MODEL, device="cpu")


@pytest.fixture(scope="module")
def app_trace(app_model):
    """A greedy trace of a short sentence by the app's tiny model."""
    return app_model.trace("Two dogs play in the snow.", beam=1)


@pytest.fixture(scope="session")
def encoder_assets(tmp_path_factory) -> Path:
    """A models folder holding a small random BERT and DeBERTa-v3, imported (built once per test session)."""
    from support.app_encoders import build_encoder_assets

    return build_encoder_assets(tmp_path_factory.mktemp("encoder-assets"))


@pytest.fixture
def encoders(encoder_assets, monkeypatch) -> Path:
    """Point the app at the encoders' assets folder."""
    monkeypatch.setenv("VIZ_MODEL_ASSETS", str(encoder_assets))
    return encoder_assets
