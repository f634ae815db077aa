"""The project installs like any Python tool (issue 35): what the wheel and the sdist hold, a clean root, one version,
and `viz-model app`'s checks. (.ci/wheel-check installs the wheel into a fresh virtual environment and serves the
explorer from it in Chromium.)"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import viz_model
from app import registry
from viz_model.cli.main import main
from viz_model.modeldir.shipped import SHIPPED_ENCODER, SHIPPED_LANGUAGE_MODEL

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILES = {".ci", ".gitignore", ".streamlit", "CHANGELOG.md", "CITATION.cff", "LICENSE", "README.md", "app",
                 "assets", "benchmarks", "configs", "deploy", "docs", "examples", "mkdocs.yml", "pyproject.toml",
                 "tests", "viz_model"}
DEFAULT_MODEL_FILES = {"config.json", "model.safetensors", "tokenizer.model", "MODEL_CARD.md", "training_stats.json",
                       "training_facts.json"}
ENCODER_FILES = DEFAULT_MODEL_FILES - {"tokenizer.model"} | {"tokenizer.json", "encoder_tokenizer.json"}


def test_the_tracked_root_holds_only_the_projects_own_files():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    top = {line.split("/")[0] for line in tracked.splitlines()}
    assert top <= PROJECT_FILES, f"files at the root that are not the project's own: {sorted(top - PROJECT_FILES)}"


def test_the_packages_pyproject_names_are_every_package_of_the_tree():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "viz_model").rglob("__init__.py")}
    found |= {"viz_model._app." + ".".join(p.parent.relative_to(ROOT).parts)
              for p in (ROOT / "app").rglob("__init__.py")}
    assert listed == found | {"viz_model._assets"}


def test_one_version_everywhere(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"viz-model {viz_model.__version__}"
    try:
        installed = importlib.metadata.version("viz-model")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("viz-model is not installed here (imported from a checkout): no installed version to compare")
    assert installed == viz_model.__version__


def build_requirements_installed() -> bool:
    """Whether every requirement of pyproject's [build-system] is installed here."""
    from packaging.requirements import Requirement

    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue  # not needed on this platform
        try:
            if importlib.metadata.version(requirement.name) not in requirement.specifier:
                return False
        except importlib.metadata.PackageNotFoundError:
            return False
    return True


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist and the wheel, as `python -m build` makes them (the wheel from the sdist)."""
    if importlib.util.find_spec("build") is None:
        pytest.skip("the build package is not installed")
    out = tmp_path_factory.mktemp("dist")
    # with the installed build backend where it meets pyproject's requirement (no download: works offline), else in
    # an isolated environment (.ci/wheel-check builds isolated too)
    isolation = ["--no-isolation"] if build_requirements_installed() else []
    done = subprocess.run([sys.executable, "-m", "build", *isolation, "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return next(out.glob("*.tar.gz")), next(out.glob("*.whl"))


@pytest.mark.slow
def test_the_wheel_holds_the_library_the_explorer_the_default_model_the_lm_the_encoder_and_nothing_else(built):
    _, wheel = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"viz_model", f"viz_model-{viz_model.__version__}.dist-info"}  # no top-level app package
    assert {f"viz_model/_assets/{viz_model.DEFAULT_MODEL}/{f}" for f in DEFAULT_MODEL_FILES} <= set(names)
    assert {f"viz_model/_assets/{SHIPPED_LANGUAGE_MODEL}/{f}" for f in DEFAULT_MODEL_FILES} <= set(names)
    assert {f"viz_model/_assets/{SHIPPED_ENCODER}/{f}" for f in ENCODER_FILES} <= set(names)
    scripts = {f"viz_model/_app/app/{script}" for page in registry.PAGES for kind in registry.KINDS
               if (script := page.script(kind)) is not None}  # every page's script for every kind
    assert {"viz_model/_app/app/streamlit_app.py", "viz_model/_app/app/icon.png", "viz_model/cli/main.py",
            f"viz_model/_app/app/{registry.NO_MODEL}", *scripts} <= set(names)
    assert f"viz_model-{viz_model.__version__}.dist-info/licenses/LICENSE" in names
    assert not [n for n in names if any(part in n for part in ("tests/", "fixtures", "benchmarks", "__pycache__",
                                                               ".whl", "multi30k-en-de"))]
    assert wheel.stat().st_size < 40 * 1024**2  # the library, the app, one fp16 translator, the small LM and encoder


@pytest.mark.slow
def test_the_sdist_holds_the_sources_the_licence_and_the_default_model(built):
    sdist, _ = built
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "viz_model/api.py", "app/streamlit_app.py",
            f"assets/{viz_model.DEFAULT_MODEL}/model.safetensors"} <= names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "docs/")) or n.endswith(".whl")]


@pytest.mark.parametrize("args, words", [
    (["--models", "/no/such/folder"], "no such folder"),
    (["--port", "0"], "--port must be from 1 to 65535"),
])
def test_app_refuses_what_cannot_work_in_one_line(capsys, args, words):
    assert main(["app", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and words in err, err


def test_app_names_an_empty_folder_a_broken_model_and_a_busy_port(tmp_path, capsys):
    import socket

    (tmp_path / "empty").mkdir()
    assert main(["app", "--models", str(tmp_path / "empty")]) == 2
    assert "no model directory in it" in capsys.readouterr().err
    broken = tmp_path / "mine" / "broken-model"
    shutil.copytree(viz_model.modeldir.shipped.ASSETS_DIR / viz_model.DEFAULT_MODEL, broken)
    (broken / "config.json").write_text('{"vocab_size": 12}')
    assert main(["app", "--models", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "broken model directory" in err and "config.json" in err, err
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        assert main(["app", "--port", str(taken.getsockname()[1])]) == 2
    assert "is taken" in capsys.readouterr().err


def test_app_names_a_device_it_cannot_use(capsys, monkeypatch):
    """Checked first, before the models and the port; each refusal is one line naming the setting."""
    import torch

    monkeypatch.setenv("VIZ_MODEL_DEVICE", "tpu")
    assert main(["app"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "VIZ_MODEL_DEVICE=tpu: device must be auto, cpu, cuda or cuda:N; got 'tpu'" in err
    monkeypatch.setenv("VIZ_MODEL_DEVICE", "cpu")
    absent = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU torch sees (cuda:0 on a machine with none)
    for device, words in (("tpu", "--device tpu: device must be auto, cpu, cuda or cuda:N"),
                          (absent, f"--device {absent}: device '{absent}' asked for, but torch sees")):
        assert main(["app", "--device", device, "--models", "/no/such/folder", "--port", "0"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and words in err, err
