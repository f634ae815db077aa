"""The suite's groups on two workers start longest first (tests/support/parallel.py), and a run records each
group's seconds for the table that orders them."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from support.parallel import GROUP_SECONDS, UNKNOWN_TEST_S, GroupSeconds, order_groups


class Item:
    """A collected test as `order_groups` reads it: its xdist_group marker."""

    def __init__(self, name: str, group: str) -> None:
        self.name, self.marker = name, pytest.mark.xdist_group(group).mark

    def get_closest_marker(self, name: str):
        return self.marker if name == "xdist_group" else None


def in_groups(loadgroup: bool = True):
    return SimpleNamespace(option=SimpleNamespace(loadgroup=loadgroup))


def test_the_longest_groups_come_first_each_in_its_own_order():
    items = [Item("a1", "a"), Item("b1", "b"), Item("a2", "a"), Item("c1", "c"), Item("d1", "d"), Item("b2", "b")]
    many = [Item(f"e{i}", "e") for i in range(7)]  # unknown: 7 tests of UNKNOWN_TEST_S
    items += many
    unknown = 7 * UNKNOWN_TEST_S
    order_groups(in_groups(), items, {"a": unknown - 0.1, "b": 100.0, "c": unknown + 1, "stale": 999.0})
    assert [item.name for item in items] == ["b1", "b2", "c1", "e0", "e1", "e2", "e3", "e4", "e5", "e6", "a1", "a2",
                                             "d1"]


def test_without_groups_the_order_stays():
    items = [Item("a1", "a"), Item("b1", "b"), Item("a2", "a")]
    order_groups(in_groups(False), items, {"b": 100.0})
    assert [item.name for item in items] == ["a1", "b1", "a2"]


def test_a_run_records_each_groups_seconds_longest_first(tmp_path):
    recorder = GroupSeconds(str(tmp_path / "seconds.json"))
    for nodeid, duration in (("t.py::a@short", 0.5), ("t.py::b@long", 2.0), ("t.py::c@short", 0.25),
                             ("t.py::d@long", 3.0), ("t.py::e", 9.0)):  # the last outside any group
        recorder.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=duration))
    recorder.pytest_sessionfinish()
    text = (tmp_path / "seconds.json").read_text()
    assert json.loads(text) == {"long": 5.0, "short": 0.8} and text.index("long") < text.index("short")


def test_a_run_without_groups_leaves_the_table_alone(tmp_path):
    recorder = GroupSeconds(str(tmp_path / "seconds.json"))
    recorder.pytest_runtest_logreport(SimpleNamespace(nodeid="t.py::a", duration=1.0))
    recorder.pytest_sessionfinish()
    assert not (tmp_path / "seconds.json").exists()


def test_the_table_holds_seconds_per_group():
    seconds = json.loads(GROUP_SECONDS.read_text())
    assert seconds and all(isinstance(value, int | float) and value >= 0 for value in seconds.values())
