"""Named SQL statements, one per file, loaded by file name.

Each layer owns its statements: the core's live in ``herald/sql/queries/``, every other
package's in its own ``queries/`` folder (``herald/ops/queries/``,
``herald/catalog/queries/``...), each file named with its package's prefix. The folders
are found by their place in the package, not by importing anything, so the core knows no
layer above it; a name is unique across all of them (two files of one name are refused).

Runtime code never builds SQL strings: it asks for a statement by name. A statement
may contain ``{name}`` placeholders for identifiers (never values); they are composed
with :mod:`psycopg.sql` so they are always quoted.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from psycopg import sql

_ROOT = "herald"
_FOLDER = "queries"
_CORE = "sql"  # the core's statements: herald/sql/queries


class UnknownQuery(KeyError):
    """No statement of that name ships with Herald."""


class DuplicateQuery(RuntimeError):
    """Two packages ship a statement of the same name."""


def _folders() -> dict[str, Traversable]:
    """Each package's statement folder, by package (``sql`` is the core's)."""
    found: dict[str, Traversable] = {}
    for package in resources.files(_ROOT).iterdir():
        folder = package.joinpath(_FOLDER)
        if package.is_dir() and folder.is_dir():
            found[package.name] = folder
    return found


@cache
def _located() -> dict[str, tuple[str, str]]:
    """Every statement: name -> (owning package, text)."""
    found: dict[str, tuple[str, str]] = {}
    for package, folder in sorted(_folders().items()):
        for entry in folder.iterdir():
            if not entry.name.endswith(".sql"):
                continue
            name = entry.name[: -len(".sql")]
            if name in found:
                raise DuplicateQuery(
                    f"statement {name!r} ships in both {found[name][0]} and {package}"
                )
            found[name] = (package, entry.read_text(encoding="utf-8"))
    return found


@cache
def _all_queries() -> dict[str, str]:
    return {name: body for name, (_, body) in _located().items()}


def owner(name: str) -> str:
    """The package whose ``queries/`` folder holds ``name`` (``sql``: the core)."""
    try:
        return _located()[name][0]
    except KeyError:
        raise UnknownQuery(name) from None


def names() -> list[str]:
    """Every statement name, sorted."""
    return sorted(_all_queries())


def text(name: str) -> str:
    try:
        return _all_queries()[name]
    except KeyError:
        raise UnknownQuery(name) from None


def query(name: str) -> sql.SQL:
    """The statement ``name``, ready to execute with named parameters."""
    return _compiled(name)


@cache
def _compiled(name: str) -> sql.SQL:
    return sql.SQL(text(name))


def query_with_identifiers(name: str, **identifiers: str) -> sql.Composed:
    """The statement ``name`` with its ``{identifier}`` placeholders quoted and filled."""
    return sql.SQL(text(name)).format(
        **{key: sql.Identifier(value) for key, value in identifiers.items()}
    )
