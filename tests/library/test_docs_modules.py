"""Every ``viz_model.x.y`` the CHANGELOG, the README and the docs name is a module or a name that imports."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEXTS = [REPO / "CHANGELOG.md", REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DOTTED = re.compile(r"(?<![\w/.-])(viz_model(?:\.\w+)+)")
# Packages only the wheel has (pyproject.toml maps app/ and assets/ into them): named by the docs that say so.
WHEEL_ONLY = ("viz_model._app", "viz_model._assets")


def resolves(name: str) -> bool:
    """Whether `name` is a module, or a name reached by attributes from the longest module that imports."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError as err:
            if err.name is not None and not ".".join(parts[:n]).startswith(err.name):
                raise  # the module exists but imports something missing: a real failure, not a wrong name
            continue
        for attribute in parts[n:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def named(path: Path) -> list[tuple[int, str]]:
    return [(n, m.group(1).rstrip(".")) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for m in DOTTED.finditer(line)]


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_path_the_text_names_imports(path):
    wrong = [f"{path.name}:{n}: {name}" for n, name in named(path)
             if not name.startswith(WHEEL_ONLY) and not resolves(name)]
    assert not wrong, "no such module or name:\n" + "\n".join(wrong)


def test_the_wheel_only_packages_are_the_wheels():
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert all(f'"{package}' in pyproject for package in WHEEL_ONLY)


def test_a_module_that_is_gone_is_found(tmp_path):
    page = tmp_path / "CHANGELOG.md"
    page.write_text("- `viz_model.decoding` above both; `viz_model.search.decoding.beam_search`, `viz_model.load`.\n"
                    "- `viz_model.search.decoding.no_such_name` and viz_model/nn/packed.py (a file).\n")
    assert [(n, name, resolves(name)) for n, name in named(page)] == [
        (1, "viz_model.decoding", False), (1, "viz_model.search.decoding.beam_search", True),
        (1, "viz_model.load", True), (2, "viz_model.search.decoding.no_such_name", False)]
