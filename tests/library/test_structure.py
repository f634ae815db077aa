"""The library's layers: an ordered list, no import up or round, nothing below the trainer imports it, the app
imports nothing from it, and analysis and attribution reach the search and the network through the one door, a
kind of model (`viz_model.kinds`): what the app's analyses run goes down the layers and never climbs back up."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def module_of(path: Path) -> str:
    """The dotted module a file of the repository is ("" for a file outside it)."""
    return ".".join(path.relative_to(REPO).with_suffix("").parts) if path.is_relative_to(REPO) else ""


def package_of(path: Path) -> str:
    """The dotted package a file of the repository is in (what its relative imports start from)."""
    return module_of(path).rpartition(".")[0]


def from_module(package: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` in `package` names (the package itself for ``from . import x``)."""
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.level and node.module else (node.module or base)


def imported_names(path: Path) -> list[tuple[str, str]]:
    """(absolute module, name) of every ``from module import name`` in a file of the repository."""
    return [(from_module(package_of(path), node), alias.name)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ImportFrom)
            for alias in node.names]


def imported_modules(path: Path) -> list[tuple[str, str]]:
    """(absolute module, enclosing function or "") of every import in a file of the repository."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = package_of(path)
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                found.extend((alias.name, function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                module = from_module(package, child)
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
    module = tmp_path / "uses_private.py"
    module.write_text("from viz_model.nn.model import Transformer, _hidden\nfrom viz_model import _version\n"
                      "from viz_model.nn import __doc__\n")
    assert private_names(module) == ["viz_model.nn.model._hidden", "viz_model._version"]


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
    ("face", ["viz_model.trace", "viz_model.kinds.*", "viz_model.api", "viz_model.translation_tasks",
              "viz_model", "viz_model.command_line", "viz_model.workers", "viz_model.on_demand", "viz_model.layer_maps",
              "viz_model.training_series"]),
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


# --- the one door: analysis/ and attribution/ reach the search and the network through a kind of model ----------
ABOVE_THE_DOOR = ("viz_model.analysis", "viz_model.attribution")
# the search and its copies of the network (int8, packed full precision, their fused layers)
BEHIND_THE_DOOR = ("viz_model.search", "viz_model.nn.quantize", "viz_model.nn.packed", "viz_model.nn.fused")
LAYER_INDEX = {name: i for i, (name, _) in enumerate(LAYERS)}
FACE = LAYER_INDEX["face"]


def within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether `module` is one of `packages` or inside one of them."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def private_names(path: Path) -> list[str]:
    """The private names (``_x``) a file imports from another module of the library, as "module._x"."""
    own = module_of(path)
    return [f"{module}.{name}" for module, name in imported_names(path)
            if name.startswith("_") and not name.startswith("__") and module.startswith("viz_model")
            and module != own]


def test_analysis_and_attribution_reach_the_search_only_through_the_door():
    offenders = []
    for module, path in library_modules().items():
        if within(module, ABOVE_THE_DOOR):
            offenders += [f"{module} imports {imported}" + (f" in {function}" if function else "")
                          for imported, function in imported_modules(path) if within(imported, BEHIND_THE_DOOR)]
            offenders += [f"{module} imports the private {name}" for name in private_names(path)]
    assert not offenders, "go through a kind of model (viz_model.kinds) instead:\n" + "\n".join(offenders)


Frame = tuple[str, str]  # (module, function's qualified name)


def call_chains(run: Callable[[], object]) -> set[tuple[Frame, ...]]:
    """Every distinct chain of library calls while `run` runs: at each call into viz_model, the library's frames on
    the stack, outermost first, each module where the chain enters it (a module calling itself is one step)."""
    chains: set[tuple[Frame, ...]] = set()

    def profile(frame: FrameType, event: str, _: object) -> None:
        if event != "call" or not within(frame.f_globals.get("__name__", ""), ("viz_model",)):
            return
        chain: list[Frame] = []
        at: FrameType | None = frame
        while at is not None:
            module = at.f_globals.get("__name__", "")
            if within(module, ("viz_model",)):
                if chain and chain[-1][0] == module:
                    chain.pop()  # walking outwards: keep the outermost frame of a module, where the chain entered it
                chain.append((module, at.f_code.co_qualname))
            at = at.f_back
        chains.add(tuple(reversed(chain)))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous)
    return chains


def behind_the_door(frame: Frame) -> bool:
    """Whether a frame is the search's or the network's own work: a module of BEHIND_THE_DOOR, or a method of a
    torch module (running the network); records, masks and other values of the lower layers are not."""
    module, qualname = frame
    owner = getattr(sys.modules.get(module), qualname.partition(".")[0], None)
    return within(module, BEHIND_THE_DOOR) or (isinstance(owner, type) and issubclass(owner, torch.nn.Module))


def walk_faults(chain: tuple[Frame, ...]) -> list[str]:
    """Where a chain of calls climbs back up to a higher layer, or steps from above the face straight to the work
    behind it."""
    def named(frame: Frame) -> str:
        return f"{frame[0].removeprefix('viz_model.')}:{frame[1]} ({LAYERS[layer_of(frame[0])[0]][0]})"

    faults = []
    for caller, callee in zip(chain, chain[1:]):
        (up,), (down,) = layer_of(caller[0]), layer_of(callee[0])
        if down > up:
            faults.append(f"climbs back up: {named(caller)} -> {named(callee)}")
        elif up > FACE > down and behind_the_door(callee):
            faults.append(f"goes around the face: {named(caller)} -> {named(callee)}")
    return faults


def app_library_calls(function: str) -> list[str]:
    """The library functions `app/analyze_pages.py`'s `function` calls, dotted (e.g.
    "viz_model.analysis.corpus_attention.analyze_corpus")."""
    tree = ast.parse((REPO / "app" / "analyze_pages.py").read_text(encoding="utf-8"))
    names = {alias.asname or alias.name: f"{node.module}.{alias.name}" for node in tree.body
             if isinstance(node, ast.ImportFrom) and within(node.module or "", ("viz_model",)) for alias in node.names}
    body = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function)
    calls = []
    for node in ast.walk(body):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            calls.append(names[node.func.id])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in names:
            calls.append(f"{names[node.func.value.id]}.{node.func.attr}")
    return calls


def library_function(dotted: str) -> Callable[..., object]:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_the_walk_check_finds_a_climb_and_a_way_around_the_face():
    """The check of the walk below, on chains the library once had: the corpus statistics searching and running the
    network themselves, and the search calling back up into the ablation's view of the network."""
    around = (("viz_model.analysis.corpus_attention", "output_ids_for"), ("viz_model.search.batched", "translate_ids"))
    assert walk_faults(around) == ["goes around the face: analysis.corpus_attention:output_ids_for (analysis) -> "
                                   "search.batched:translate_ids (search)"]
    forward = (("viz_model.analysis.corpus_attention", "forced_attentions"),
               ("viz_model.nn.model", "Transformer.forward"))
    assert walk_faults(forward)[0].startswith("goes around the face")
    climb = (("viz_model.analysis.ablation", "ablate"), ("viz_model.search.decoding", "beam_search"),
             ("viz_model.analysis.ablation", "HeadMaskedNetwork.encode"))
    assert walk_faults(climb)[1] == ("climbs back up: search.decoding:beam_search (search) -> "
                                     "analysis.ablation:HeadMaskedNetwork.encode (analysis)")
    record = (("viz_model.analysis.corpus_attention", "forced_attentions"),
              ("viz_model.nn.model", "Seq2SeqOutput.records"))
    door = (("viz_model.analysis.corpus_attention", "f"),
            ("viz_model.kinds.translator", "TranslationModel.translate"),
            ("viz_model.search.batched", "translate_ids"), ("viz_model.nn.model", "Transformer.forward"))
    assert walk_faults(record) == walk_faults(door) == []
    assert app_library_calls("compute_head_stats") == ["viz_model.analysis.corpus_attention.analyze_corpus"]


@pytest.mark.parametrize("function", ["compute_head_stats", "compute_ablation"])
def test_the_apps_analyses_go_down_the_layers_through_the_door(tiny_model, function):
    """What the app's head statistics and ablation run, followed call by call on the tiny model: every chain of
    calls goes down the layers (app -> analysis -> face -> search -> network) and never climbs back up."""
    (dotted,) = app_library_calls(function)
    run = library_function(dotted)
    if function == "compute_head_stats":
        chains = call_chains(lambda: run(tiny_model, ["Two dogs play in the snow.", "A man runs."]))
    else:
        chains = call_chains(lambda: run(tiny_model, "Two dogs play in the snow.", [("cross", 1, 0)], beam=2,
                                         alpha=0.6))
    assert any(layer_of(chain[-1][0]) == [LAYER_INDEX["network"]] for chain in chains)  # it saw the network run
    faults = sorted({fault for chain in chains for fault in walk_faults(chain)})
    assert not faults, f"{dotted}:\n" + "\n".join(faults)
