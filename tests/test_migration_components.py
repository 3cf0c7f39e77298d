"""Migrations per component: the core alone, an application on top, and databases
migrated by the released single chain keep working unchanged."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql as psql

from herald import sql
from herald.cli import main
from herald.db import AsyncConn, connect, conninfo
from herald.migrate import RELEASED_AS, MigrationError, available, components, migrate

RELEASED = Path(__file__).resolve().parent / "released"
CORE_TABLES = {
    "jobs",
    "tenants",
    "key_versions",
    "idempotency_keys",
    "dead_letters",
    "stale_writes",
    "rescues",
    "schema_migrations",
}


@pytest.fixture
async def schemas(database: str) -> AsyncIterator[list[str]]:
    """Schema names nobody has created yet (take what you need), dropped afterwards."""
    names = [f"m_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    yield names
    async with await connect(conninfo(database, "public")) as conn:
        for name in names:
            await conn.execute(
                psql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psql.Identifier(name))
            )


async def _snapshot(conn: AsyncConn, schema: str) -> dict[str, Any]:
    """Tables, columns, constraints, indexes and functions of ``schema``, comparable."""

    async def rows(query: str) -> set[tuple[Any, ...]]:
        cur = await conn.execute(query.encode(), {"schema": schema})
        return {tuple(r.values()) for r in await cur.fetchall()}

    return {
        "columns": await rows(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %(schema)s"
        ),
        "constraints": await rows(
            "SELECT t.relname, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
            "JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
            "WHERE n.nspname = %(schema)s"
        ),
        "indexes": await rows(
            "SELECT tablename, indexname, replace(indexdef, %(schema)s || '.', '') "
            "FROM pg_indexes WHERE schemaname = %(schema)s"
        ),
        "functions": await rows(
            "SELECT p.proname, p.prosrc FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s"
        ),
    }


def _tables(snapshot: dict[str, Any]) -> set[str]:
    return {table for table, *_ in snapshot["columns"]}


async def test_the_core_migrates_alone_and_the_rest_comes_later_to_the_same_schema(
    database: str, schemas: list[str]
) -> None:
    core_first, all_at_once = schemas
    async with await connect(conninfo(database, core_first)) as conn:
        applied = await migrate(conn, core_first, only=["core"])
        assert {m.component for m in applied} == {"core"}
        extra = _tables(await _snapshot(conn, core_first)) - CORE_TABLES
        # A table here comes from a migration in herald/migrations/ that is not the core's:
        # it belongs in its package's own herald/<package>/migrations/ (with REQUIRES).
        assert extra == set(), f"the core's migrations create {sorted(extra)}"
        assert _tables(await _snapshot(conn, core_first)) == CORE_TABLES
        later = await migrate(conn, core_first)
        assert {m.component for m in later} == set(components()) - {"core"}
        assert await migrate(conn, core_first) == []
        grown = await _snapshot(conn, core_first)
    async with await connect(conninfo(database, all_at_once)) as conn:
        await migrate(conn, all_at_once)
        assert grown == await _snapshot(conn, all_at_once)
    assert {"datasets", "api_keys", "schedules", "duties", "console_sessions"} <= _tables(grown)


def test_an_application_brings_the_components_it_requires_in_number_order() -> None:
    catalog = available(["catalog"])
    assert {m.component for m in catalog} == {"core", "ops", "schedules", "generations", "catalog"}
    assert [m.version for m in catalog] == sorted(m.version for m in catalog)
    assert {m.component for m in available(["console"])} == {"core", "api", "console"}
    with pytest.raises(MigrationError, match="no component 'nothing'"):
        available(["nothing"])


def test_every_component_requires_only_components_migrated_before_it_could_be_used() -> None:
    """Each component a component requires has its first migration before one of the
    component's own: a component may come to build on another later (the catalog's
    versions became generations in 0026), never on one that comes after all of it."""
    known = components()
    first = {name: min(m.version for m in c.migrations) for name, c in known.items()}
    last = {name: max(m.version for m in c.migrations) for name, c in known.items()}
    for name, component in known.items():
        for required in component.requires:
            assert first[required] < last[name], (name, required)


async def test_a_database_migrated_by_the_released_chain_keeps_working(
    database: str, schemas: list[str]
) -> None:
    """0001-0008 as released (0008 whole, since split between ops and the catalog):
    their recorded checksums are accepted, and the schema ends up the same."""
    released, fresh = schemas
    whole = (RELEASED / "0008_housekeeping.sql").read_text(encoding="utf-8")
    assert hashlib.sha256(whole.encode()).hexdigest() == RELEASED_AS[8]
    before = [m for m in available() if m.version < 8]  # byte for byte what was released
    chain = [(m.version, m.name, m.checksum, m.body) for m in before]
    chain.append((8, "housekeeping", RELEASED_AS[8], whole))
    async with await connect(conninfo(database, released)) as conn:
        await conn.execute(psql.SQL("CREATE SCHEMA {}").format(psql.Identifier(released)))
        await conn.execute(sql.query("migrations_bootstrap"))
        for version, name, checksum, body in chain:  # as the released Herald applied it
            async with conn.transaction():
                await conn.execute(psql.SQL(body))
                await conn.execute(
                    sql.query("migrations_record"),
                    {"version": version, "name": name, "checksum": checksum},
                )
        applied = await migrate(conn, released)
        assert [m.version for m in applied] == [m.version for m in available() if m.version > 8]
        upgraded = await _snapshot(conn, released)
    async with await connect(conninfo(database, fresh)) as conn:
        await migrate(conn, fresh)
        assert upgraded == await _snapshot(conn, fresh)


async def test_an_edited_released_file_is_still_refused(database: str, schemas: list[str]) -> None:
    schema = schemas[0]
    async with await connect(conninfo(database, schema)) as conn:
        await migrate(conn, schema, only=["core"])
        await conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
        with pytest.raises(MigrationError, match="0001_jobs was changed"):
            await migrate(conn, schema)


async def test_the_shared_error_cap_keeps_the_latest_20(database: str, schemas: list[str]) -> None:
    schema = schemas[0]
    async with await connect(conninfo(database, schema)) as conn:
        await migrate(conn, schema, only=["core"])
        cur = await conn.execute(
            "SELECT herald_append_error(herald_append_error(%s::jsonb, '{\"n\": 20}'),"
            " '{\"n\": 21}') AS errors",
            (json.dumps([{"n": n} for n in range(20)]),),
        )
        row = await cur.fetchone()
    assert row is not None and [e["n"] for e in row["errors"]] == list(range(2, 22))


async def test_herald_migrate_only_core_leaves_the_applications_out(
    database: str,
    schemas: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    schema = schemas[0]
    monkeypatch.setenv("HERALD_DATABASE_URL", database)
    monkeypatch.setenv("HERALD_SCHEMA", schema)
    # The command runs its own event loop: off this test's loop, in a thread.
    assert await asyncio.to_thread(main, ["migrate", "--only", "core"]) == 0
    printed = capsys.readouterr().out.split()
    assert "applied" in printed and "0001_jobs" in printed and "0004_catalog" not in printed
    async with await connect(conninfo(database, schema)) as conn:
        assert _tables(await _snapshot(conn, schema)) == CORE_TABLES
