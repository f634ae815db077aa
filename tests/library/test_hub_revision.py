"""A hub model's version (issue 60, item 3): `viz_model.load(id, revision=...)` and the CLI's ``--revision`` pass the
revision to huggingface_hub and into the import cache's key; a revision the hub does not have, a revision of a
folder and a revision of this project's model directory are each refused in one line. The hub download is replaced
by local GPT-NeoX folders (no network)."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
from support.fake_hub import fake_revisions  # noqa: E402
from support.hf_lm import build_lm_folder  # noqa: E402
from test_hub_load import cached  # noqa: E402

import viz_model  # noqa: E402
from viz_model.cli.main import main  # noqa: E402
from viz_model.hf.hub_cache import CACHE_ENV, cache_name  # noqa: E402
from viz_model.hf.importer import HFImportError  # noqa: E402
from viz_model.modeldir.checkpoint import CheckpointError  # noqa: E402

HUB_ID = "EleutherAI/pythia-tiny"


@pytest.fixture(scope="module")
def revisions(tmp_path_factory):
    """Two versions of one GPT-NeoX (other random weights), as the hub's revisions ``step0`` and ``main``."""
    root = tmp_path_factory.mktemp("neox-revisions")
    return {"step0": build_lm_folder(root, "gpt_neox", seed=1, folder_name="step0"),
            "main": build_lm_folder(root, "gpt_neox", seed=2, folder_name="main")}


@pytest.fixture
def hub(revisions, tmp_path, monkeypatch):
    """The hub replaced by `revisions` for `HUB_ID`; the revisions asked for."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return fake_revisions(monkeypatch, revisions)


def test_a_revision_is_fetched_and_cached_apart_from_the_main_branch(hub, tmp_path):
    early = viz_model.load(HUB_ID, device="cpu", revision="step0")
    latest = viz_model.load(HUB_ID, device="cpu")
    assert set(hub) == {"step0", None}
    assert cached(tmp_path) == ["EleutherAI--pythia-tiny", "EleutherAI--pythia-tiny__rev-step0"]
    ids = early.encode("a dog runs")
    assert not early.forced_pass(ids).logits.allclose(latest.forced_pass(ids).logits)  # two versions, two models
    asked = len(hub)
    again = viz_model.load(HUB_ID, device="cpu", revision="step0")
    assert again.directory == early.directory and len(hub) == asked  # the cache key holds the revision


def test_a_revision_the_hub_does_not_have_is_one_line_and_caches_nothing(hub, tmp_path):
    with pytest.raises(CheckpointError) as err:
        viz_model.load(HUB_ID, device="cpu", revision="step999")
    assert str(err.value) == (f"{HUB_ID}: the hub has no revision 'step999' of it (a branch, tag or commit, such as "
                              "Pythia's step1000)")
    assert cached(tmp_path) == []


def test_the_cli_passes_its_revision(hub, tmp_path, capsys):
    assert main(["import", HUB_ID, "--out", str(tmp_path / "imported"), "--revision", "step0"]) == 0
    assert hub == ["step0"]
    assert main(["import", HUB_ID, "--out", str(tmp_path / "other"), "--revision", "step999"]) == 2
    assert "the hub has no revision 'step999'" in capsys.readouterr().err
    # a command of --model loads the revision (then refuses a language model, as it does any)
    assert main(["translate", "--model", HUB_ID, "--revision", "step0", "a dog"]) == 2
    assert hub[-1] == "step0" and "a decoder-only language model" in capsys.readouterr().err


def test_a_revision_of_what_is_no_hub_id_is_refused_in_one_line(revisions, tmp_path, monkeypatch, random_model_dir):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(CheckpointError, match=r"revision='step0': .* is a folder here; a revision names a version"):
        viz_model.load(revisions["main"], device="cpu", revision="step0")
    with pytest.raises(CheckpointError, match=r"revision='step0': choose how a hub id"):
        viz_model.load(random_model_dir, device="cpu", revision="step0")
    with pytest.raises(HFImportError, match="not a revision"):
        cache_name(HUB_ID, revision="../up")
    assert cache_name(HUB_ID, revision="refs/pr/1") == "EleutherAI--pythia-tiny__rev-refs--pr--1"
