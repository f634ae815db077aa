"""The suite on two pytest-xdist workers: hooks that tests/conftest.py imports (plain `pytest` runs on `WORKERS`
workers, each test file's tests on one worker, a file with a module fixture in several versions split per version)."""

from __future__ import annotations

import pytest

WORKERS = 2  # the CI machine's cores; torch runs one thread in each worker (tests/conftest.py)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config) -> None:
    """Plain `pytest` runs on `WORKERS` workers in groups (`worker_group`); `-n N`, `-n 0`, `-p no:xdist`, `--pdb`
    and `--collect-only` choose otherwise. A worker learns the controller's mode from its workerinput."""
    option = config.option
    if hasattr(config, "workerinput"):
        option.loadgroup = option.loadgroup or config.workerinput.get("dist") == "loadgroup"
        return
    if getattr(option, "numprocesses", 0) is not None or option.usepdb or option.collectonly:
        return
    option.numprocesses = WORKERS
    if option.dist == "no":
        option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """The controller's distribution mode, for `pytest_cmdline_main` on the worker."""
    node.workerinput["dist"] = node.config.option.dist


def worker_group(item) -> str:
    """The tests that run together on one worker: those of one file, and of one version of each module- or
    session-scoped fixture the file has in several versions (such as a model family), built once for them."""
    key = [item.path.stem]
    spec = getattr(item, "callspec", None)
    for name, index in sorted(spec.indices.items() if spec else ()):
        fixtures = item._fixtureinfo.name2fixturedefs.get(name)
        if fixtures and fixtures[-1].scope != "function":
            key.append(f"{name}{index}")
    return "-".join(key)


def add_worker_groups(config, items) -> None:
    """Each test marked `xdist_group` with its `worker_group` (with `--dist loadgroup`, unless marked already)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(worker_group(item)))
