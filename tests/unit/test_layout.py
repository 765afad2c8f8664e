"""The house's shape, checked: no module of shared/ over 400 lines, no import circle among Bindery's
modules, and shared code that never reaches into functions/. The import graph is read from the source: every
import statement, at module level, inside a function, or under `if TYPE_CHECKING:` (a reader follows a
type's import as any other), so neither a lazy import nor a type-only one can hide a circle."""

from __future__ import annotations

import ast
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SHARED / "bindery").rglob("*.py")):
        parts = list(path.relative_to(SHARED).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(tree: ast.AST) -> list[str]:
    """Every module an import statement names, type-only imports included. `from a import b` names a.b
    when that is a module, and a otherwise."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
            names.append(node.module)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args:
            # import_module("a.b") or import_module(f"a.{x}.c"): the name, or its fixed beginning.
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and first.values:
                first = first.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.append(first.value)
    return names


def _graph(sources: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the modules of `sources` (name -> text; Bindery's own by default) it imports."""
    modules = sources or {name: path.read_text() for name, path in _modules().items()}
    graph: dict[str, set[str]] = {}
    for name, text in modules.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from bindery.storage import Store` is an edge to the package; `from bindery import
                # errors`, to the module it names and not to `bindery` itself.
                named = [f"{node.module}.{a.name}" for a in node.names]
                targets = [m if m in modules else node.module for m in named]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {m for m in targets if m in modules and m != name}
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


def test_no_module_of_shared_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(SHARED)): n
        for path in sorted(SHARED.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_import_circle_among_bindery_modules_type_only_imports_included() -> None:
    circles = _cycles(_graph())
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_graph_counts_a_type_only_import_and_a_package_s_own() -> None:
    """What the circle test rests on: an import under TYPE_CHECKING is an edge, and so is a module's
    import from its own package's __init__ (storage's modules from `bindery.storage`)."""
    sources = {
        "p": "",
        "p.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import B\n",
        "p.b": "from p import c\n\ndef f():\n    from p import a\n",
        "p.c": "from p import thing\n",
    }
    graph = _graph(sources)
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.a", "p.c"}, "p.c": {"p"}}
    assert _cycles(graph) == [["p.a", "p.b"]]


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_layer_never_imports_functions_or_the_development_package() -> None:
    """The layer holds bindery alone: a handler's code, or the local stack's, is not there to import."""
    reaching = {
        name: sorted(
            m
            for m in _imports(ast.parse(path.read_text()))
            if m.split(".")[0] in ("functions", "bindery_local", "bindery_cli")
        )
        for name, path in _modules().items()
    }
    assert {name: found for name, found in reaching.items() if found} == {}
