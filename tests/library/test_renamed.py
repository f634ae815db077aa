"""The module paths 0.3 renamed: each old path still imports, as its new module, and warns that it is deprecated."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from viz_model.renamed import MOVED, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_its_new_module_with_a_deprecation_warning(old):
    sys.modules.pop(old, None)
    package, _, name = old.rpartition(".")
    vars(importlib.import_module(package)).pop(name, None)  # as if this process had never imported the old path
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .*: import {MOVED[old]}$"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__spec__.name == MOVED[old] and module.__name__ == MOVED[old]  # its own identity kept


@pytest.mark.parametrize("old, name", sorted(MOVED_NAMES))
def test_a_moved_name_still_imports_from_its_old_module_with_a_deprecation_warning(old, name):
    new = MOVED_NAMES[old, name]
    with pytest.warns(DeprecationWarning, match=rf"^{old}\.{name} is deprecated .*: import it from {new}$") as record:
        moved = getattr(importlib.import_module(old), name)
    assert moved is getattr(importlib.import_module(new), name)
    assert record[0].filename == __file__  # the warning points at the line that asked for it
    assert name not in vars(importlib.import_module(old))  # no copy kept: each use warns
    missing = "no_such_name"
    with pytest.raises(AttributeError, match=f"^module '{old}' has no attribute '{missing}'$"):
        getattr(importlib.import_module(old), missing)


def test_no_old_path_is_a_file_and_no_two_modules_of_the_four_share_a_name():
    folders = ("lessons", "plot", "analysis", "attribution")
    names = [p.stem for folder in folders for p in (ROOT / "viz_model" / folder).glob("*.py") if p.stem != "__init__"]
    assert sorted(set(names)) == sorted(names), sorted(n for n in set(names) if names.count(n) > 1)
    assert not set(names) & set(folders)  # plot/analysis.py beside analysis/ was a second read too
    assert not [old for old in MOVED if (ROOT / (old.replace(".", "/") + ".py")).exists()]


def test_the_old_names_import_in_a_fresh_process_as_a_user_of_0_2_wrote_them():
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "from viz_model.lessons.learn_pages import attention_by_hand\n"
            "try:\n    from viz_model.lessons.teaching import attention_by_hand as old\n"
            "except DeprecationWarning as warning:\n    print(warning)\n"
            "warnings.simplefilter('ignore', DeprecationWarning)\n"
            "from viz_model.plot import attention\n"
            "import viz_model.analysis.corpus as corpus\n"
            "print(attention.__name__, corpus.analyze_corpus.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.splitlines() == [
        "viz_model.lessons.teaching is deprecated and goes in the next release: import viz_model.lessons.learn_pages",
        "viz_model.plot.trace_figures viz_model.analysis.corpus_attention"]


@pytest.mark.parametrize("package, name", [("viz_model.plot", "attention"), ("viz_model.plot", "teaching"),
                                           ("viz_model.plot", "analysis"), ("viz_model.analysis", "alignment"),
                                           ("viz_model.analysis", "corpus")])
def test_a_submodule_0_2_reached_as_its_package_s_attribute_still_is_one(package, name):
    """0.2's package __init__ imported these, so ``viz_model.plot.attention`` worked without importing it."""
    code = (f"import warnings; warnings.simplefilter('error', DeprecationWarning)\nimport {package} as package\n"
            f"try:\n    package.{name}\nexcept DeprecationWarning as warning:\n    print(warning)\n"
            f"warnings.simplefilter('ignore', DeprecationWarning)\nprint(package.{name}.__name__)\n"
            "try:\n    package.no_such_module\nexcept AttributeError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    old = f"{package}.{name}"
    assert out.stdout.splitlines() == [f"{old} is deprecated and goes in the next release: import {MOVED[old]}",
                                       MOVED[old], f"module '{package}' has no attribute 'no_such_module'"], out.stderr
