"""The house's shape, checked: no module of Bindery's over 500 lines, no import circle among its modules, and
shared code that never reaches into functions/. The import graph is read from the source (every import
statement, at module level or inside a function; `if TYPE_CHECKING:` blocks excepted, since they never
run), so a lazy import cannot hide a circle."""

from __future__ import annotations

import ast
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SHARED / "bindery").rglob("*.py")):
        parts = list(path.relative_to(SHARED).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _runtime_imports(tree: ast.AST) -> list[str]:
    """Every module an import statement names, skipping what only type checkers see."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args:
            # import_module("a.b") or import_module(f"a.{x}.c"): the name, or its fixed beginning.
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and first.values:
                first = first.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.append(first.value)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = _runtime_imports(ast.parse(path.read_text()))
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _is_parent(parent: str, child: str) -> bool:
    return child.startswith(parent + ".")


def test_no_module_is_over_500_lines() -> None:
    long = {
        name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_import_circle_among_bindery_modules() -> None:
    graph = _graph()
    # A module importing its own package's __init__ is how Python packages work, not a circle of design.
    graph = {m: {n for n in deps if not _is_parent(n, m)} for m, deps in graph.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_layer_never_imports_functions_or_the_development_package() -> None:
    """The layer holds bindery alone: a handler's code, or the local stack's, is not there to import."""
    reaching = {
        name: sorted(
            m
            for m in _runtime_imports(ast.parse(path.read_text()))
            if m.split(".")[0] in ("functions", "bindery_local", "bindery_cli")
        )
        for name, path in _modules().items()
    }
    assert {name: found for name, found in reaching.items() if found} == {}
