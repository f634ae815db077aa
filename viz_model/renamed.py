"""Module paths renamed in 0.3, and names moved to another module: each old path or name still imports, for one
release, as its new module or the moved object, and warns that it is deprecated."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

MOVED = {
    "viz_model.lessons.teaching": "viz_model.lessons.hand_attention",
    "viz_model.lessons.position_schemes": "viz_model.lessons.position_parts",
    "viz_model.lessons.watch": "viz_model.lessons.watch_trainer",
    "viz_model.plot.teaching": "viz_model.plot.pe_lab_figures",
    "viz_model.plot.position_schemes": "viz_model.plot.position_figures",
    "viz_model.plot.watch": "viz_model.plot.watch_figures",
    "viz_model.plot.positions": "viz_model.plot.length_figures",
    "viz_model.plot.analysis": "viz_model.plot.analysis_figures",
    "viz_model.plot.attribution": "viz_model.plot.attribution_figures",
    "viz_model.plot.attention": "viz_model.plot.map_figures",
    "viz_model.analysis.alignment": "viz_model.analysis.word_alignment",
    "viz_model.analysis.corpus": "viz_model.analysis.corpus_attention",
    "viz_model.attribution.alignment": "viz_model.attribution.method_aer",
    "viz_model.attribution.corpus": "viz_model.attribution.corpus_scores",
}
"""Old module path -> the module that holds its code now."""

MOVED_NAMES = {
    ("viz_model.train.loop", "LabelSmoothedLoss"): "viz_model.train.objectives",
}
"""(old module, name) -> the module that holds the name now; the old module's ``__getattr__`` calls `moved_name`."""


class RenamedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of `MOVED` (after every other finder) and gives the new module itself, with a warning."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} is deprecated and goes in the next release: import {MOVED[spec.name]}",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(MOVED[spec.name])
        spec.loader_state = module.__spec__  # the import machinery sets the old path's spec on it: put back after
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state


def register() -> None:
    """Let the old paths of `MOVED` import (once per process)."""
    if not any(isinstance(finder, RenamedModules) for finder in sys.meta_path):
        sys.meta_path.append(RenamedModules())


def moved_name(module: str, name: str) -> Any:
    """`name` of `module` where `MOVED_NAMES` says it is now, with a DeprecationWarning; else AttributeError."""
    new = MOVED_NAMES.get((module, name))
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(f"{module}.{name} is deprecated and goes in the next release: import it from {new}",
                  DeprecationWarning, stacklevel=3)
    return getattr(importlib.import_module(new), name)
