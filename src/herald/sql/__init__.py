"""Named SQL statements, one per file under ``queries/``, loaded by file name.

Runtime code never builds SQL strings: it asks for a statement by name. A statement
may contain ``{name}`` placeholders for identifiers (never values); they are composed
with :mod:`psycopg.sql` so they are always quoted.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from psycopg import sql

_PACKAGE = "herald.sql"


class UnknownQuery(KeyError):
    """No statement of that name ships with Herald."""


@cache
def _all_queries() -> dict[str, str]:
    folder = resources.files(_PACKAGE).joinpath("queries")
    found: dict[str, str] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found[entry.name[: -len(".sql")]] = entry.read_text(encoding="utf-8")
    return found


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
