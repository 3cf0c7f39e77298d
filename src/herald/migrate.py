"""Versioned plain-SQL migrations, applied in order under an advisory lock.

Files are ``migrations/NNNN_name.sql``. Each runs in its own transaction together with
its ledger row, so a crash mid-way leaves the schema at a whole version. The advisory
lock makes concurrent starters queue up; the second one finds nothing left to do.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import cast

from psycopg import sql

from herald import sql as queries
from herald.db import AsyncConn

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    """The database's migration ledger disagrees with the files shipped."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    body: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.body.encode()).hexdigest()


def available() -> list[Migration]:
    folder = resources.files("herald").joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(
                Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8"))
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migrations share a number: {versions}")
    return found


async def pending(conn: AsyncConn) -> list[Migration]:
    """Migrations not yet applied (raises if the ledger disagrees with the files)."""
    schema = await _current_schema(conn)
    if schema is None:
        return available()
    exists = await conn.execute(queries.query("migrations_ledger_exists"), {"schema": schema})
    row = await exists.fetchone()
    if not row or not row["present"]:
        return available()
    cur = await conn.execute(queries.query("migrations_applied"))
    applied = {r["version"]: r for r in await cur.fetchall()}
    todo = []
    for migration in available():
        done = applied.get(migration.version)
        if done is None:
            todo.append(migration)
        elif done["checksum"] != migration.checksum:
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name} was changed after it "
                "was applied; add a new migration instead"
            )
    return todo


async def _current_schema(conn: AsyncConn) -> str | None:
    cur = await conn.execute(queries.query("migrations_current_schema"))
    row = await cur.fetchone()
    return None if row is None else cast(str | None, row["schema"])


async def migrate(conn: AsyncConn, schema: str, *, pooled: bool = False) -> list[Migration]:
    """Bring ``schema`` up to date; returns what was applied (empty when current).

    ``pooled``: through a pooler in transaction mode: everything in one transaction,
    under a transaction-scoped lock, with the schema set for that transaction only.
    """
    if pooled:
        return await _migrate_in_one_transaction(conn, schema)
    # Lock first: concurrent CREATE SCHEMA IF NOT EXISTS can still collide in the catalog.
    await conn.execute(queries.query("migrations_lock"), {"schema": schema})
    try:
        await conn.execute(
            queries.query_with_identifiers("migrations_create_schema", schema=schema)
        )
        await conn.execute(queries.query("migrations_bootstrap"))
        todo = await pending(conn)
        for migration in todo:
            async with conn.transaction():
                await _apply(conn, migration)
        return todo
    finally:
        await conn.execute(queries.query("migrations_unlock"), {"schema": schema})


async def _migrate_in_one_transaction(conn: AsyncConn, schema: str) -> list[Migration]:
    async with conn.transaction():
        await conn.execute(queries.query("migrations_xact_lock"), {"schema": schema})
        await conn.execute(
            queries.query_with_identifiers("migrations_create_schema", schema=schema)
        )
        await conn.execute(
            queries.query_with_identifiers("migrations_local_search_path", schema=schema)
        )
        await conn.execute(queries.query("migrations_bootstrap"))
        todo = await pending(conn)
        for migration in todo:
            await _apply(conn, migration)
        return todo


async def _apply(conn: AsyncConn, migration: Migration) -> None:
    await conn.execute(sql.SQL(migration.body))
    await conn.execute(
        queries.query("migrations_record"),
        {"version": migration.version, "name": migration.name, "checksum": migration.checksum},
    )
