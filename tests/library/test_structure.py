"""The library's layers: nothing below the trainer imports it, and the app imports nothing from it."""

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
    allowed = {("viz_model/cli.py", "cmd_train"), ("viz_model/cli.py", "cmd_export")}
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
    found = dict(imported_modules(REPO / "viz_model" / "cli.py"))
    assert found.get("viz_model.train.command") == "cmd_train" and "viz_model.textfiles" in found
    assert ("viz_model.batching", "") in imported_modules(REPO / "viz_model" / "analysis" / "forced.py")
