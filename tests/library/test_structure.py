"""The library's layers: an ordered list, no import up or round, nothing below the trainer imports it, and the app
imports nothing from it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> list[tuple[str, str]]:
    """(absolute module, enclosing function or "") of every import in a file of the repository."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                found.extend((alias.name, function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                module = f"{base}.{child.module}" if child.level and child.module else (child.module or base)
                found.extend((f"{module}.{alias.name}" if not child.module else module, function)
                             for alias in child.names)
            visit(child, name)

    visit(tree, "")
    return found


def test_nothing_outside_the_trainer_imports_it_except_to_train():
    allowed = {("viz_model/cli/main.py", "cmd_train"), ("viz_model/cli/main.py", "cmd_export")}
    offenders = []
    for path in sorted((REPO / "viz_model").rglob("*.py")) + sorted((REPO / "app").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("viz_model/train/"):
            continue
        for module, function in imported_modules(path):
            if (module == "viz_model.train" or module.startswith("viz_model.train.")) and \
                    (relative, function) not in allowed:
                offenders.append(f"{relative} ({function or 'module level'}) imports {module}")
    assert not offenders, "\n".join(offenders)


def test_the_library_imports_nothing_from_the_app():
    offenders = [f"{p.relative_to(REPO)} imports {m}" for p in sorted((REPO / "viz_model").rglob("*.py"))
                 for m, _ in imported_modules(p) if m == "app" or m.startswith("app.")]
    assert not offenders, "\n".join(offenders)


def test_the_import_walker_sees_relative_and_lazy_imports(tmp_path):
    """The checks above would pass vacuously if the walker missed imports: it resolves these."""
    found = dict(imported_modules(REPO / "viz_model" / "cli" / "main.py"))
    assert found.get("viz_model.train.command") == "cmd_train" and "viz_model.data.textfiles" in found
    assert ("viz_model.data.batching", "") in imported_modules(REPO / "viz_model" / "search" / "forced.py")


# The library's layers, lowest first: a module imports modules of its own layer or of layers below, never above.
# "pkg.*" is a folder: the package and every module in it.
LAYERS: list[tuple[str, list[str]]] = [
    ("configuration", ["viz_model.config.*"]),
    ("network", ["viz_model.nn.*"]),
    ("tokenizers", ["viz_model.tokenization.*"]),
    ("data", ["viz_model.data.*"]),
    ("model directories", ["viz_model.modeldir.*"]),
    ("search", ["viz_model.search.*"]),
    ("Hugging Face folders", ["viz_model.hf.*"]),
    ("face", ["viz_model.trace", "viz_model.api", "viz_model", "viz_model.command_line"]),
    ("analysis", ["viz_model.analysis.*"]),
    ("attribution", ["viz_model.attribution.*"]),
    ("lessons", ["viz_model.lessons.*"]),
    ("figures", ["viz_model.plot.*"]),
    ("training", ["viz_model.train.*"]),
    ("commands", ["viz_model.cli.*", "viz_model.__main__"]),
]


def library_modules() -> dict[str, Path]:
    """Every module of viz_model/ by its dotted name (a package by its own name)."""
    modules = {}
    for path in sorted((REPO / "viz_model").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Per module, the library modules it names in an import (module level or lazy) and where ("" or a function).

    ``from .a import name`` counts as an import of ``a`` (or of ``a.name`` where that is a module); the parent
    packages that Python runs on the way are not counted.
    """
    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        graph[name] = {}
        for imported, function in imported_modules(path):
            target = owner(imported)
            if target is not None and target != name:
                graph[name].setdefault(target, function)
    return graph


def find_circle(graph: dict[str, dict[str, str]]) -> list[str]:
    """One circle of imports as [a, b, ..., a], or [] when the graph has none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once every path from it is walked
    path: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (circle := walk(nxt)):
                return circle
        state[node] = "done"
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (circle := walk(start)):
            return circle
    return []


def covers(entry: str, module: str) -> bool:
    """Whether an entry of LAYERS names `module`: itself, or a folder ("pkg.*") that holds it."""
    return module == entry or (entry.endswith(".*") and (module == entry[:-2] or module.startswith(entry[:-1])))


def layer_of(module: str) -> list[int]:
    """The indices of the layers that place `module` (exactly one where the list is right)."""
    return [i for i, (_, entries) in enumerate(LAYERS) for entry in entries if covers(entry, module)]


def upward_imports(graph: dict[str, dict[str, str]]) -> list[str]:
    """Each import of a module of a higher layer, as "A (layer x) imports B (layer y)"."""
    found = []
    for module, imports in sorted(graph.items()):
        for imported, function in sorted(imports.items()):
            (low,), (high,) = layer_of(module), layer_of(imported)
            if high > low:
                where = f" in {function}" if function else ""
                found.append(f"{module} (layer {LAYERS[low][0]}) imports {imported} (layer {LAYERS[high][0]}){where}")
    return found


def test_every_module_of_the_library_is_in_exactly_one_layer():
    modules = library_modules()
    misplaced = {m: [LAYERS[i][0] for i in layer_of(m)] for m in modules if len(layer_of(m)) != 1}
    assert not misplaced, f"place each module in exactly one layer of LAYERS (in none: []): {misplaced}"
    stale = [entry for _, entries in LAYERS for entry in entries if not any(covers(entry, m) for m in modules)]
    assert not stale, f"LAYERS names modules that do not exist: {stale}"


def test_the_library_imports_no_module_of_a_higher_layer():
    offenders = upward_imports(import_graph(library_modules()))
    assert not offenders, "\n".join(offenders)


def test_the_library_has_no_import_circle():
    circle = find_circle(import_graph(library_modules()))
    assert not circle, "import circle: " + " -> ".join(circle)


def test_the_checks_find_a_circle_and_an_upward_import():
    """The two checks above on graphs that break them: the circle and the upward import this project once had."""
    circle = {"viz_model.search.decoding": {"viz_model.search.transformers_rule": "run"},
              "viz_model.search.transformers_rule": {"viz_model.search.decoding": ""}, "viz_model.config": {}}
    assert find_circle(circle) == ["viz_model.search.decoding", "viz_model.search.transformers_rule",
                                   "viz_model.search.decoding"]
    assert find_circle({"viz_model.search.decoding": {"viz_model.search.hypotheses": ""},
                        "viz_model.search.hypotheses": {}}) == []
    assert upward_imports({"viz_model.train.__main__": {"viz_model.cli.main": ""}, "viz_model.cli.main": {}}) == [
        "viz_model.train.__main__ (layer training) imports viz_model.cli.main (layer commands)"]
    graph = import_graph(library_modules())
    assert graph["viz_model.search.decoding"]["viz_model.search.transformers_rule"] == ""  # it reads this library
    assert graph["viz_model.cli.main"]["viz_model.train.command"] == "cmd_train"


def test_the_top_of_the_library_holds_at_most_ten_modules_and_a_folder_per_layer():
    """The folders show the layers: each layer but the face is one or more folders, and few modules sit on top."""
    top = sorted(p.name for p in (REPO / "viz_model").glob("*.py"))
    assert len(top) <= 10, f"{len(top)} modules directly in viz_model/: {top}"
    loose = [entry for name, entries in LAYERS if name != "face" for entry in entries
             if not entry.endswith(".*") and entry != "viz_model.__main__"]
    assert not loose, f"a layer other than the face names single modules: {loose}"
