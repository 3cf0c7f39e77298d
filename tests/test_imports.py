"""The import graph: no module imports itself in a circle (typing-only imports aside),
and a handler's context knows its lease, never the worker."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path, modules: dict[str, Path], typing: bool) -> set[str]:
    """Herald modules ``path`` imports at module level (with ``typing``: also those under
    ``if TYPE_CHECKING``). ``from herald import sql`` names the submodule, not the package."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not typing:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "") in modules:
                subs = [
                    f"{n.module}.{a.name}" for a in n.names if f"{n.module}.{a.name}" in modules
                ]
                found.update(subs)
                if len(subs) < len(n.names):
                    found.add(str(n.module))
            elif isinstance(n, ast.Import):
                found.update(a.name for a in n.names if a.name in modules)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_in_a_circle() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules, typing=False) - {name} for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_context_and_the_lease_do_not_know_the_worker() -> None:
    modules = _modules()
    for name in ("herald.context", "herald.lease", "herald.attempt"):
        assert "herald.worker" not in _imports(modules[name], modules, typing=True), name


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
