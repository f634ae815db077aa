"""The suite on two pytest-xdist workers: hooks that tests/conftest.py imports (plain `pytest` runs on `WORKERS`
workers, each test file's tests on one worker, a file with a module fixture in several versions split per version,
the longest groups first)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

WORKERS = 2  # the CI machine's cores; torch runs one thread in each worker (tests/conftest.py)
# Seconds each group took in a run of the suite on two workers (how to refresh it: `record_group_seconds`)
GROUP_SECONDS = Path(__file__).with_name("group_seconds.json")
UNKNOWN_TEST_S = 0.3  # a group not in GROUP_SECONDS is taken to need this much per test
RECORD = "VIZ_MODEL_GROUP_SECONDS"  # a path: a plain run writes each group's seconds there at its end


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config) -> None:
    """Plain `pytest` runs on `WORKERS` workers in groups (`worker_group`), handed out in the order the workers
    collect them (`order_groups`); `-n N`, `-n 0`, `-p no:xdist`, `--pdb` and `--collect-only` choose otherwise. A
    worker learns the controller's mode from its workerinput."""
    option = config.option
    if hasattr(config, "workerinput"):
        option.loadgroup = option.loadgroup or config.workerinput.get("dist") == "loadgroup"
        return
    if getattr(option, "numprocesses", 0) is not None or option.usepdb or option.collectonly:
        return
    option.numprocesses = WORKERS
    if option.dist == "no":
        option.dist = "loadgroup"
        option.loadscopereorder = False  # xdist would otherwise hand out the groups with the most tests first


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """The controller's distribution mode, for `pytest_cmdline_main` on the worker."""
    node.workerinput["dist"] = node.config.option.dist


def worker_group(item) -> str:
    """The tests that run together on one worker: those of one file, and of one version of each module- or
    session-scoped fixture the file has in several versions (such as a model family), built once for them. A file
    splits further where it says so: per test (`SPLIT_BY_TEST = True`, its module fixtures cheap beside its tests),
    or per fixture of `SPLIT_BY_FIXTURES` a test uses (such as a server of its own)."""
    key = [item.path.stem]
    spec = getattr(item, "callspec", None)
    for name, index in sorted(spec.indices.items() if spec else ()):
        fixtures = item._fixtureinfo.name2fixturedefs.get(name)
        if fixtures and fixtures[-1].scope != "function":
            key.append(f"{name}{index}")
    module = getattr(item, "module", None)
    key += [name for name in getattr(module, "SPLIT_BY_FIXTURES", ()) if name in item.fixturenames][:1]
    if getattr(module, "SPLIT_BY_TEST", False):
        key.append(item.name.replace("[", "-").replace("]", ""))  # xdist reads a group name up to the last "]"
    return "-".join(key)


def add_worker_groups(config, items) -> None:
    """Each test marked `xdist_group` with its `worker_group` (with `--dist loadgroup`, unless marked already)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(worker_group(item)))


def group_of(item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def order_groups(config, items, seconds: dict[str, float] | None = None) -> None:
    """With `--dist loadgroup`, the groups in the order of their expected time, longest first (`seconds`, default
    GROUP_SECONDS; `UNKNOWN_TEST_S` a test for a group not in it), each group's tests in their order: xdist hands
    the groups out in this order, so that no long group starts last (longest processing time first)."""
    if not getattr(config.option, "loadgroup", False):
        return
    seconds = json.loads(GROUP_SECONDS.read_text()) if seconds is None else seconds
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(group_of(item), []).append(item)
    order = sorted(groups, key=lambda name: -seconds.get(name, UNKNOWN_TEST_S * len(groups[name])))
    items[:] = [item for name in order for item in groups[name]]


class GroupSeconds:
    """Each group's seconds (setup, call and teardown of its tests), written at the end of the run to the path
    `RECORD` names: `VIZ_MODEL_GROUP_SECONDS=tests/support/group_seconds.json pytest` refreshes GROUP_SECONDS."""

    def __init__(self, path: str) -> None:
        self.path, self.seconds = Path(path), {}

    def pytest_runtest_logreport(self, report) -> None:
        if "@" in report.nodeid:
            group = report.nodeid.rsplit("@", 1)[1]
            self.seconds[group] = self.seconds.get(group, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        if not self.seconds:  # not a run in groups
            return
        ordered = dict(sorted(((g, round(s, 1)) for g, s in self.seconds.items()), key=lambda pair: -pair[1]))
        self.path.write_text(json.dumps(ordered, indent=0) + "\n")


def record_group_seconds(config) -> None:
    """On the controller of a run in groups, record each group's seconds where `RECORD` says (if it says)."""
    if os.environ.get(RECORD) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(GroupSeconds(os.environ[RECORD]), "group-seconds")
