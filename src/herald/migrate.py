"""Versioned plain-SQL migrations, applied in order under an advisory lock.

Each component owns its migrations: the core's are ``herald/migrations/NNNN_name.sql``,
another package's ``herald/<package>/migrations/NNNN_name.sql`` with a ``REQUIRES`` file
naming the components its schema builds on (``catalog`` needs ``core``, ``ops`` and
``schedules``). Numbers are unique across all components and say the order: a component
written against the core's schema of its day comes after it, so applying the selected
components' files in number order lets an application depend on the core. An engine user
may migrate the core alone (``components=["core"]``) and add components later.

Each file runs in its own transaction together with its ledger row, so a crash mid-way
leaves the schema at a whole version. The advisory lock makes concurrent starters queue
up; the second one finds nothing left to do. The ledger (``schema_migrations``) records
number, name and checksum: a released file is never edited; when one had to be split
between components, :data:`RELEASED_AS` maps the checksum databases recorded for the
released file to the part that stayed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import cast

from psycopg import sql

from herald import sql as queries
from herald.db import AsyncConn

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_ROOT = "herald"
_FOLDER = "migrations"
_REQUIRES = "REQUIRES"
CORE = "core"

# Released files since split, by number: the checksum a database recorded for the whole
# file, accepted for the part that kept the number. 0008 (housekeeping) also added the
# catalog's dataset_versions.columns, now the catalog's 0013 (ADD COLUMN IF NOT EXISTS).
RELEASED_AS = {
    8: "f881a930bff8fa08ea795defdfb06df055f037eaf93e507e564db04b5e18308d",
}


class MigrationError(RuntimeError):
    """The database's migration ledger disagrees with the files shipped."""


class SchemaNotMigrated(MigrationError):
    """A process that needs the schema found migrations not yet applied."""

    def __init__(self, schema: str, todo: list[Migration]) -> None:
        first = todo[0]
        super().__init__(
            f"schema {schema!r} is not migrated ({len(todo)} pending, first "
            f"{first.version:04d}_{first.name}); run `herald migrate` first"
        )
        self.pending = todo


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    body: str
    component: str = CORE

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.body.encode()).hexdigest()

    def recorded_as(self, checksum: str) -> bool:
        """Whether a ledger row of this number with ``checksum`` is this file applied."""
        return checksum in (self.checksum, RELEASED_AS.get(self.version))


@dataclass(frozen=True)
class Component:
    name: str
    requires: tuple[str, ...]
    migrations: tuple[Migration, ...]


def _folders() -> dict[str, Traversable]:
    root = resources.files(_ROOT)
    found = {CORE: root.joinpath(_FOLDER)}
    for package in root.iterdir():
        folder = package.joinpath(_FOLDER)
        if package.name != _FOLDER and package.is_dir() and folder.is_dir():
            found[package.name] = folder
    return found


def components() -> dict[str, Component]:
    """Every component that ships migrations, by name (the core's is ``core``)."""
    found = {}
    for name, folder in _folders().items():
        requires: tuple[str, ...] = ()
        migrations = []
        for entry in folder.iterdir():
            match = _FILE.match(entry.name)
            if match:
                body = entry.read_text(encoding="utf-8")
                migrations.append(Migration(int(match.group(1)), match.group(2), body, name))
            elif entry.name == _REQUIRES:
                lines = entry.read_text(encoding="utf-8").splitlines()
                words = (line.split() for line in lines if not line.startswith("#"))
                requires = tuple(word for line in words for word in line)
        found[name] = Component(name, requires, tuple(migrations))
    for component in found.values():
        unknown = set(component.requires) - set(found)
        if unknown:
            raise MigrationError(f"{component.name} requires unknown components {sorted(unknown)}")
    return found


def _closure(wanted: Collection[str], known: dict[str, Component]) -> set[str]:
    """The components ``wanted`` and everything they require, the core always."""
    todo = [CORE, *wanted]
    selected: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in known:
            raise MigrationError(f"no component {name!r} ships migrations: {sorted(known)}")
        if name not in selected:
            selected.add(name)
            todo.extend(known[name].requires)
    return selected


def available(only: Collection[str] | None = None) -> list[Migration]:
    """The migrations of the components ``only`` (and what they require; None: every
    component), in the order they apply."""
    known = components()
    every = sorted((m for c in known.values() for m in c.migrations), key=lambda m: m.version)
    versions = [m.version for m in every]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migrations share a number: {versions}")
    selected = set(known) if only is None else _closure(only, known)
    return [m for m in every if m.component in selected]


async def pending(conn: AsyncConn, only: Collection[str] | None = None) -> list[Migration]:
    """Migrations not yet applied (raises if the ledger disagrees with the files)."""
    schema = await _current_schema(conn)
    if schema is None:
        return available(only)
    exists = await conn.execute(queries.query("migrations_ledger_exists"), {"schema": schema})
    row = await exists.fetchone()
    if not row or not row["present"]:
        return available(only)
    cur = await conn.execute(queries.query("migrations_applied"))
    applied = {r["version"]: r for r in await cur.fetchall()}
    todo = []
    for migration in available(only):
        done = applied.get(migration.version)
        if done is None:
            todo.append(migration)
        elif not migration.recorded_as(done["checksum"]):
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name} was changed after it "
                "was applied; add a new migration instead"
            )
    return todo


async def require_migrated(conn: AsyncConn, schema: str) -> None:
    """Raise :class:`SchemaNotMigrated` unless every shipped migration is applied."""
    todo = await pending(conn)
    if todo:
        raise SchemaNotMigrated(schema, todo)


async def _current_schema(conn: AsyncConn) -> str | None:
    cur = await conn.execute(queries.query("migrations_current_schema"))
    row = await cur.fetchone()
    return None if row is None else cast(str | None, row["schema"])


async def migrate(
    conn: AsyncConn,
    schema: str,
    only: Collection[str] | None = None,
    *,
    pooled: bool = False,
    upto: int | None = None,
) -> list[Migration]:
    """Bring ``schema`` up to date; returns what was applied (empty when current).

    ``only`` names the components to migrate (with what they require; None: all).
    ``pooled``: through a pooler in transaction mode: everything in one transaction,
    under a transaction-scoped lock, with the schema set for that transaction only.
    ``upto``: apply no migration numbered above it (a schema as an older release left
    it, for upgrade tests)."""
    if pooled:
        return await _migrate_in_one_transaction(conn, schema, only, upto)
    # Lock first: concurrent CREATE SCHEMA IF NOT EXISTS can still collide in the catalog.
    await conn.execute(queries.query("migrations_lock"), {"schema": schema})
    try:
        await conn.execute(
            queries.query_with_identifiers("migrations_create_schema", schema=schema)
        )
        await conn.execute(queries.query("migrations_bootstrap"))
        todo = _upto(await pending(conn, only), upto)
        for migration in todo:
            async with conn.transaction():
                await _apply(conn, migration)
        return todo
    finally:
        await conn.execute(queries.query("migrations_unlock"), {"schema": schema})


def _upto(todo: list[Migration], upto: int | None) -> list[Migration]:
    return todo if upto is None else [m for m in todo if m.version <= upto]


async def _migrate_in_one_transaction(
    conn: AsyncConn, schema: str, only: Collection[str] | None, upto: int | None
) -> list[Migration]:
    async with conn.transaction():
        await conn.execute(queries.query("migrations_xact_lock"), {"schema": schema})
        await conn.execute(
            queries.query_with_identifiers("migrations_create_schema", schema=schema)
        )
        await conn.execute(
            queries.query_with_identifiers("migrations_local_search_path", schema=schema)
        )
        await conn.execute(queries.query("migrations_bootstrap"))
        todo = _upto(await pending(conn, only), upto)
        for migration in todo:
            await _apply(conn, migration)
        return todo


async def _apply(conn: AsyncConn, migration: Migration) -> None:
    await conn.execute(sql.SQL(migration.body))
    await conn.execute(
        queries.query("migrations_record"),
        {"version": migration.version, "name": migration.name, "checksum": migration.checksum},
    )
