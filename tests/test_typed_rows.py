"""Rows that leave a module are typed: no public function of the engine's core, operator,
schedule, metrics, API and console modules takes or returns a ``herald.db.Row`` (a dict
of columns). Read from the source with ``ast``; see docs/architecture.md, "Rows"."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

HERALD = Path(__file__).resolve().parent.parent / "src" / "herald"

# Files, or folders whose every module counts (the applications' console packages live
# in their own packages, not under console/).
TYPED = (
    "client.py",
    "metrics",
    "ops",
    "schedules",
    "console",
    "api/jobs.py",
    "api/operations.py",
    "api/schedules.py",
    "api/models.py",
    "api/problems.py",
    "api/health.py",
    "tables.py",
    "maintenance.py",
    "registry.py",
    "tenancy.py",
    "migrate.py",
    "up.py",
    "cli.py",
)


def _modules(root: Path) -> Iterator[Path]:
    for name in TYPED:
        path = root / name
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _names_row(annotation: ast.expr | None) -> bool:
    """Whether an annotation mentions ``Row`` (bare, ``db.Row``, in a string or a union)."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Row":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Row":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                parsed = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            if _names_row(parsed.body):
                return True
    return False


def _public_functions(
    tree: ast.Module,
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and methods of module-level classes, public ones only."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_"):
                yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            methods = [
                i for i in node.body if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)
            ]
            for method in methods:
                if not method.name.startswith("_"):
                    yield f"{node.name}.{method.name}", method


def offenders(root: Path = HERALD) -> list[str]:
    """``path:line name`` of every public function with ``Row`` in its signature."""
    found = []
    for path in _modules(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, func in _public_functions(tree):
            if _flagged(func):
                found.append(f"{path.relative_to(root)}:{func.lineno} {name}")
    return found


def _flagged(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``Row`` is in the function's return or any parameter's annotation."""
    args = func.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    return _names_row(func.returns) or any(_names_row(a.annotation) for a in every)


def test_every_listed_module_exists() -> None:
    assert [name for name in TYPED if not (HERALD / name).exists()] == []


def test_no_public_function_takes_or_returns_a_dict_row() -> None:
    assert offenders() == []


def test_the_scan_finds_a_row_in_a_signature() -> None:
    source = (
        "from herald.db import Row\n"
        "import herald.db as db\n"
        "def plain(x: int) -> int: ...\n"
        "async def listed(x: int) -> list[Row]: ...\n"
        "def taken(row: 'Row | None') -> None: ...\n"
        "def _private(row: Row) -> Row: ...\n"
        "class Reader:\n"
        "    def read(self, *rows: db.Row) -> None: ...\n"
        "    def _inner(self) -> Row: ...\n"
    )
    names = [name for name, f in _public_functions(ast.parse(source)) if _flagged(f)]
    assert names == ["listed", "taken", "Reader.read"]
