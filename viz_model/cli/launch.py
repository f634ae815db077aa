"""``viz-model app``: start the explorer (Streamlit) from an installed package or a clone, from any directory.

The explorer's code is ``app/`` of the repository; an installed wheel carries it as ``viz_model/_app/app`` (no
top-level ``app`` package: ``streamlit_app.py`` puts the folder above it on ``sys.path`` itself). Model
directories are found in the folders given with ``--models`` and in the shipped models' folder, passed to the app
as ``VIZ_MODEL_ASSETS``. Everything a user can get wrong is checked first and said in one line.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from ..config.checks import check_int
from ..hf.hub_cache import HUB_ENV
from ..modeldir.checkpoint import CheckpointError, check_model_dir
from ..modeldir.shipped import ASSETS_DIR, available_models
from ..nn.devices import DEVICE_ENV, device_from_env, resolve_device
from .warm_up import STREAMLIT_OPTIONS, local_url, warm_up_in_background

PACKAGE = Path(__file__).resolve().parents[1]  # viz_model/
PACKAGED_APP = PACKAGE / "_app" / "app" / "streamlit_app.py"
CHECKOUT_APP = PACKAGE.parent / "app" / "streamlit_app.py"
# no file watcher: a served explorer does not rerun on edits, and Streamlit's watcher resolves the path of every
# imported module (torch's, transformers') on the server's event loop after each run of a page, holding back what it
# sends
STREAMLIT_SETTINGS = ["--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
                      "--server.fileWatcherType", "none"]


class LaunchError(ValueError):
    """The explorer cannot start; the message says why in one line."""


def app_script() -> Path:
    """The explorer's entry point: the installed package's copy, else the clone's ``app/``."""
    for script in (PACKAGED_APP, CHECKOUT_APP):
        if script.is_file():
            return script
    raise LaunchError(f"the explorer's code is missing (neither {PACKAGED_APP} nor {CHECKOUT_APP}): reinstall "
                      "viz-model")


def model_folders(extra: list[str]) -> list[Path]:
    """The folders of model directories the app shows: `extra` (``--models``) first, then those of
    ``VIZ_MODEL_ASSETS``, then the shipped models' folder; each given folder must hold a model, and every model
    directory in them must pass `check_model_dir`."""
    given = [Path(folder).expanduser() for folder in extra]
    for folder in given:
        if not folder.is_dir():
            raise LaunchError(f"--models {folder}: no such folder")
        if not available_models(folder):
            raise LaunchError(f"--models {folder}: no model directory in it (a model directory holds config.json, "
                              "model.safetensors and its tokenizer; `viz-model import` and `viz-model export` "
                              "write one)")
    from_env = [Path(p) for p in os.environ.get("VIZ_MODEL_ASSETS", "").split(os.pathsep) if p]
    folders = list(dict.fromkeys([*given, *from_env, ASSETS_DIR]))
    names = [(folder, name) for folder in folders for name in available_models(folder)]
    if not names:
        raise LaunchError(f"no model found in {os.pathsep.join(map(str, folders))}: the shipped model is missing "
                          "(reinstall viz-model) and no --models folder was given")
    for folder, name in names:
        try:
            check_model_dir(folder / name)
        except CheckpointError as err:
            raise LaunchError(f"a broken model directory: {err}") from None
    return folders


def check_port(port: int, address: str) -> None:
    """That `port` is a port number nothing listens on at `address`."""
    check_int("--port", port, 1, 65535, error=LaunchError, message=f"--port must be from 1 to 65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError as err:
            raise LaunchError(f"port {port} on {address or 'every address'} is taken ({err.strerror}): choose "
                              "another with --port") from None


def check_device(device: str | None) -> str:
    """The device the explorer's models run on: `device` (``--device``), else ``VIZ_MODEL_DEVICE``, else auto,
    checked (cuda only where torch sees that GPU)."""
    if device is None:
        try:
            return device_from_env()
        except ValueError as err:
            raise LaunchError(str(err)) from None
    try:
        resolve_device(device)
    except ValueError as err:
        raise LaunchError(f"--device {device}: {err}") from None
    return device


def run_app(port: int = 8501, models: list[str] | None = None, address: str = "", headless: bool = False,
            device: str | None = None, warm: bool = True, hub: bool = True) -> int:
    """Start the explorer (Ctrl-C stops it). On POSIX this process becomes the Streamlit server (exec), so a signal
    to it (a supervisor's, a deployment's) reaches the server itself; elsewhere it waits for it and returns its
    exit status. With `warm`, the server runs the default page once as soon as it answers (`warm_up`), so the
    first visitor does not wait for torch's import, the model's load and the first trace. Without `hub`, visitors
    cannot have the server fetch models from the hub (a public server's choice)."""
    device = check_device(device)
    folders = model_folders(models or [])
    check_port(port, address)
    script = app_script()
    env = {**os.environ, "VIZ_MODEL_ASSETS": os.pathsep.join(str(folder) for folder in folders), DEVICE_ENV: device,
           **({} if hub else {HUB_ENV: "off"})}
    command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
               *STREAMLIT_SETTINGS, *(["--server.address", address] if address else []),
               *(["--server.headless", "true"] if headless else []), *(STREAMLIT_OPTIONS if warm else [])]
    print(f"viz-model: the explorer on http://{address or 'localhost'}:{port} (models from "
          f"{os.pathsep.join(map(str, folders))}, device {device}); Ctrl-C stops it", file=sys.stderr, flush=True)
    if warm:
        warm_up_in_background(local_url(address, port))
    if os.name == "posix":
        sys.stdout.flush()
        os.execve(sys.executable, command, env)
    return subprocess.call(command, env=env)
