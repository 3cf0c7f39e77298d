"""The applications hand typed rows across their modules, not ``herald.db.Row`` dicts.

Read from the source with ``ast``: no public function (module level or method, no
leading underscore) of the generations, the catalog, social's accounts and console, and
ingestion's providers, inspection and console names ``Row`` in its parameters or its
return type; and no fetch is followed by ``assert row is not None`` there (a typed
helper raises ``MissingRow`` or the code says what a missing row means).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "herald"

TYPED = [
    *sorted((SRC / "generations").rglob("*.py")),
    *sorted((SRC / "catalog").rglob("*.py")),
    *sorted((SRC / "api").glob("catalog*.py")),
    SRC / "social" / "accounts.py",
    *sorted((SRC / "social" / "console").rglob("*.py")),
    SRC / "ingest" / "providers.py",
    SRC / "ingest" / "inspect.py",
    *sorted((SRC / "ingest" / "console").rglob("*.py")),
]


def _row_names(tree: ast.Module) -> set[str]:
    """The names ``herald.db.Row`` goes by in a module (a module may call another thing
    ``Row``: the catalog's sources name a record of a data file so)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "herald.db":
            names |= {a.asname or a.name for a in node.names if a.name == "Row"}
    return names


def _public_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and not node.name.startswith("_"):
            yield node
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, functions) and not item.name.startswith("_"):
                    yield item


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    args = function.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None and arg.annotation is not None:
            yield arg.annotation
    if function.returns is not None:
        yield function.returns


def _names_row(annotation: ast.expr, names: set[str]) -> bool:
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id in names:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "Row | None"
            words = node.value.replace("[", " ").replace("]", " ").replace("|", " ").split()
            if names.intersection(words):
                return True
    return False


def untyped_signatures(path: Path) -> list[str]:
    """The public functions of the module at ``path`` whose signature names ``Row``."""
    tree = ast.parse(path.read_text(), str(path))
    names = _row_names(tree)
    return [
        f"{path.name}:{function.lineno} {function.name}"
        for function in _public_functions(tree)
        if any(_names_row(a, names) for a in _annotations(function))
    ]


def asserted_rows(path: Path) -> list[str]:
    """``assert row is not None`` on what a fetch answered (by the names fetched rows go by)."""
    fetched = ("row", "record", "found", "candidate", "run", "after", "current", "item")
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Assert):
            for test in ast.walk(node.test):
                if (
                    isinstance(test, ast.Compare)
                    and isinstance(test.left, ast.Name)
                    and test.left.id in fetched
                    and isinstance(test.ops[0], ast.IsNot)
                ):
                    found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_public_function_of_the_applications_takes_or_returns_a_dict_row() -> None:
    assert all(path.exists() for path in TYPED)
    assert [line for path in TYPED for line in untyped_signatures(path)] == []


def test_no_fetched_row_is_asserted_present() -> None:
    assert [line for path in TYPED for line in asserted_rows(path)] == []


def test_the_scan_finds_a_row_in_any_position_of_a_public_signature(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from herald.db import AsyncConn, Row\n"
        "async def fetch(conn: AsyncConn) -> list[Row]: ...\n"
        "def show(*, row: Row | None = None) -> str: ...\n"
        "def quoted(row: 'Row | None') -> None: ...\n"
        "class View:\n"
        "    def render(self, *rows: Row) -> None: ...\n"
        "    def _private(self, row: Row) -> None: ...\n"
        "def _helper(row: Row) -> None: ...\n"
        "def typed(conn: AsyncConn) -> int: ...\n"
    )
    assert [line.split()[-1] for line in untyped_signatures(probe)] == [
        "fetch",
        "show",
        "quoted",
        "render",
    ]
    # A module's own Row (the catalog's sources call a data file's record so) is not one.
    own = tmp_path / "own.py"
    own.write_text("from collections.abc import Sequence\nRow = Sequence[object]\n"
                   "def read(r: Row) -> Row: ...\n")  # fmt: skip
    assert untyped_signatures(own) == []
    asserted = tmp_path / "asserted.py"
    asserted.write_text("async def f(conn):\n    row = await g(conn)\n    assert row is not None\n")
    assert asserted_rows(asserted) == ["asserted.py:3"]
