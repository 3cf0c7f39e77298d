"""The layers are real: what may import what, read from the source with ``ast``.

core  <-  services (ops, schedules)  <-  applications  <-  adapters

A module may import its own layer and the layers below it, never one above: the core
knows no service, application or adapter, and offers protocols (admission gates,
maintenance hooks, housekeeping duties) they register with instead. No two modules
import each other, directly or round a circle (imports under TYPE_CHECKING count).
See docs/architecture.md.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

CORE = 0
SERVICES = 1
APPLICATIONS = 2
ADAPTERS = 3
LAYER_NAMES = {
    CORE: "core",
    SERVICES: "services",
    APPLICATIONS: "applications",
    ADAPTERS: "adapters",
}

# The engine: job model, admission, worker, maintenance, migrations, SQL.
CORE_MODULES = {
    "herald",
    "herald.attempt",
    "herald.backoff",
    "herald.client",
    "herald.quotas",
    "herald.tenancy",
    "herald.config",
    "herald.context",
    "herald.db",
    "herald.encoding",
    "herald.errors",
    "herald.hooks",
    "herald.lease",
    "herald.loop",
    "herald.loopwatch",
    "herald.maintenance",
    "herald.migrate",
    "herald.outcomes",
    "herald.payloads",
    "herald.periodic",
    "herald.registry",
    "herald.rows",
    "herald.sql",
    "herald.states",
    "herald.tables",
    "herald.worker",
}
# generations is the publication contract applications build on (the catalog publishes
# its versions as generations), so it sits with the services.
SERVICE_PACKAGES = {"herald.ops", "herald.schedules", "herald.generations"}
# Everything a process or a person talks to: HTTP, the console, the command line, metrics.
ADAPTER_MODULES = {
    "herald.api",
    "herald.console",
    "herald.cli",
    "herald.__main__",
    "herald.up",
    "herald.demo",
    "herald.metrics",
}
# An application's own plug for an adapter (its console pages, its CLI commands, its HTTP
# routes, its demo that serves the API) lives in its package but belongs to the adapters'
# layer.
ADAPTER_PLUGS = {"console", "cli", "demo", "api"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "herald").rglob("*.py"))}


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int:
    if module in CORE_MODULES or any(_within(module, m) for m in CORE_MODULES - {"herald"}):
        return CORE
    if any(_within(module, m) for m in ADAPTER_MODULES):
        return ADAPTERS
    parts = module.split(".")
    if len(parts) >= 3 and parts[2] in ADAPTER_PLUGS:
        return ADAPTERS
    if any(_within(module, p) for p in SERVICE_PACKAGES):
        return SERVICES
    return APPLICATIONS  # herald.<application>: catalog, ingest, social...


def _imports(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """The Herald modules ``module`` imports, anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from herald import sql` imports the module herald.sql.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in known:  # `import herald.x.y` of a name inside
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


def import_graph() -> dict[str, set[str]]:
    return {module: set(targets) for module, targets in _import_graph().items()}


@cache
def _import_graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    known = set(modules)
    return {m: frozenset(_imports(m, p, known)) for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_imports_only_its_own_layer_and_the_layers_below() -> None:
    wrong = [
        f"{module} ({LAYER_NAMES[layer_of(module)]}) imports {target} "
        f"({LAYER_NAMES[layer_of(target)]})"
        for module, targets in import_graph().items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert wrong == []


def test_the_core_imports_no_service_application_or_adapter() -> None:
    graph = import_graph()
    core = [m for m in graph if layer_of(m) == CORE]
    assert {"herald.registry", "herald.worker", "herald.maintenance", "herald.sql"} <= set(core)
    outside = {(m, t) for m in core for t in graph[m] if layer_of(t) != CORE}
    assert outside == set()


def test_applications_do_not_import_each_other() -> None:
    graph = import_graph()
    crossing = {
        (m, t)
        for m, targets in graph.items()
        for t in targets
        if layer_of(m) == APPLICATIONS
        and layer_of(t) == APPLICATIONS
        and m.split(".")[1] != t.split(".")[1]
    }
    assert crossing == set()


# The one edge left of the circle the fenced-lease work removes (JobContext holds the
# worker, for its type only). Delete it from here when the context no longer imports it.
KNOWN_EDGES = {("herald.context", "herald.worker")}


def test_no_import_cycles() -> None:
    graph = import_graph()
    for module, target in KNOWN_EDGES:
        graph[module].discard(target)
    assert _cycles(graph) == []


def test_the_layer_check_sees_a_violation_and_a_cycle() -> None:
    """The checks above would catch what they guard against (not vacuously green)."""
    assert layer_of("herald.worker") == CORE and layer_of("herald.ops.limits") == SERVICES
    assert layer_of("herald.catalog.pipeline") == APPLICATIONS
    assert layer_of("herald.catalog.console") == ADAPTERS == layer_of("herald.api.app")
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "herald.registry" in graph["herald.worker"]
    assert "herald.sql" in graph["herald.maintenance"]  # `from herald import sql`
