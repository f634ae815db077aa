"""Long prompts without branches (issue 58, part 3): how a trace's maps are read ("whole" or "rows") is decided once in
the library (`AttentionTrace.reading`); no page under app/views branches on "long", app/ holds no size threshold of
its own, and a page only looks its parts up by the reading (`READINGS[trace.reading(kind)]`)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from viz_model import on_demand
from viz_model.plot import long_mask_figures

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "app"
VIEWS = APP_DIR / "views"
THRESHOLDS = {"is_long", "LONG_MAP_TOKENS", "WHOLE_MAP_TOKENS", "FULL_MAPS_MAX_TOKENS"}  # the library's alone


def names(node: ast.AST) -> set[str]:
    """Every identifier `node` mentions: names and attributes."""
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute))}


def branch_tests(tree: ast.AST) -> list[ast.AST]:
    """The tests of every branch in `tree`: if / elif, conditional expressions, while, comprehension filters and
    match subjects."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            found.append(node.test)
        elif isinstance(node, ast.comprehension):
            found += node.ifs
        elif isinstance(node, ast.Match):
            found.append(node.subject)
    return found


def says_long(name: str) -> bool:
    """Whether an identifier has the word "long" (`long`, `is_long`, `LONG_MAP_TOKENS`; not `longest`)."""
    return "long" in name.lower().split("_")


def long_branches(path: Path) -> list[str]:
    """Where `path` branches on a name with the word "long" in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{test.lineno} {sorted(n for n in names(test) if says_long(n))}"
            for test in branch_tests(tree) if any(says_long(n) for n in names(test))]


def test_no_page_branches_on_long():
    found = [b for path in sorted(VIEWS.rglob("*.py")) for b in long_branches(path)]
    assert len(found) == 0, found


def test_the_count_sees_a_long_branch(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("long = is_long(trace, 'decoder')\nif long:\n    pass\nx = 1 if n > LONG_MAP_TOKENS else 2\n"
                    "y = [k for k in kinds if not is_long(trace, k)]\n")
    assert len(long_branches(page)) == 3
    page.write_text("if longest is not None:\n    pass\n")
    assert long_branches(page) == []


def test_app_holds_no_size_threshold_of_its_own():
    used = {f"{path.relative_to(ROOT)}: {n}" for path in sorted(APP_DIR.rglob("*.py"))
            for n in names(ast.parse(path.read_text(encoding="utf-8"))) & THRESHOLDS}
    assert not used, used


def test_a_page_looks_its_parts_up_by_the_reading_and_never_branches_on_it():
    asked = []
    for path in sorted(VIEWS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        keys = {id(node.slice) for node in ast.walk(tree) if isinstance(node, ast.Subscript)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reading":
                asked.append((path.name, node.lineno, id(node) in keys))
        assert not [t for t in branch_tests(tree) if "reading" in {
            n.func.attr for n in ast.walk(t) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}], path
    assert asked and all(looked_up for _, _, looked_up in asked), asked


def test_every_table_of_parts_covers_both_readings():
    tables = []
    for path in sorted(VIEWS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("READINGS", "ROLLOUTS", "CHECKS")
                                                    for t in node.targets):
                tables.append((path.name, sorted(k.value for k in node.value.keys)))
    assert len(tables) >= 5, tables
    assert all(keys == sorted(on_demand.READINGS) for _, keys in tables), tables


@pytest.mark.parametrize(("queries", "keys", "expected"), [(1, 1, "whole"), (256, 256, "whole"), (257, 3, "rows"),
                                                           (12, 300, "rows")])
def test_the_reading_is_decided_by_the_maps_size(queries, keys, expected):
    assert on_demand.reading(queries, keys) == expected


def test_figures_decide_their_own_drawing_by_the_reading():
    short, long = np.tril(np.ones((8, 8), bool)), np.tril(np.ones((300, 300), bool))
    labels = [str(i) for i in range(300)]
    assert [s for _, s in long_mask_figures.mask_drawings(short, labels[:8], labels[:8], "m", 4)] == [""]
    assert [s for _, s in long_mask_figures.mask_drawings(long, labels, labels, "m", 150)] == ["", "-window"]
    assert list(long_mask_figures.token_bars(np.zeros(8), labels[:8]).data[0].x) == labels[:8]
    assert list(long_mask_figures.token_bars(np.zeros(300), labels).data[0].x) == list(range(300))
    assert "last 48 rows" in long_mask_figures.causal_step_figure(labels, 299).layout.title.text
    assert "last" not in long_mask_figures.causal_step_figure(labels[:8], 7).layout.title.text
