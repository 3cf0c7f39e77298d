"""Migrations: idempotent, concurrent-safe, and every named statement fits the schema."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql as psql

from herald import sql
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from herald.migrate import available, migrate

_PARAM = re.compile(r"%\((\w+)\)s")
# Statements PostgreSQL cannot PREPARE (utility commands): run them and roll back.
_UTILITY = re.compile(r"^\s*(LISTEN|CREATE|DROP|ALTER|SET)\b", re.IGNORECASE)
_COPY = re.compile(r"^\s*COPY\b", re.IGNORECASE)
# Nor VACUUM, which cannot run in a transaction either: it runs for real (harmless).
_VACUUM = re.compile(r"^\s*VACUUM\b", re.IGNORECASE)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


@pytest.fixture
async def fresh_schema(database: str) -> AsyncIterator[tuple[str, str]]:
    """A schema name nobody has created yet, dropped after the test."""
    name = f"m_{uuid.uuid4().hex[:12]}"
    yield database, name
    conn = await connect(conninfo(database, "public"))
    async with conn:
        await conn.execute(
            psql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psql.Identifier(name))
        )


async def _open(database: str, schema: str) -> AsyncConn:
    return await connect(conninfo(database, schema))


async def test_migrating_twice_is_a_no_op(settings: Settings) -> None:
    assert settings.database_url is not None
    async with await _open(settings.database_url, settings.schema) as conn:
        assert await migrate(conn, settings.schema) == []
        cur = await conn.execute("SELECT version, name, checksum FROM schema_migrations")
        ledger = {r["version"]: (r["name"], r["checksum"]) for r in await cur.fetchall()}
    assert ledger == {m.version: (m.name, m.checksum) for m in available()}


async def test_concurrent_migrators_apply_each_migration_once(
    fresh_schema: tuple[str, str],
) -> None:
    database, schema = fresh_schema
    conns = [await _open(database, schema) for _ in range(4)]
    try:
        results = await asyncio.gather(*(migrate(c, schema) for c in conns))
    finally:
        for c in conns:
            await c.close()
    applied = sorted(m.version for result in results for m in result)
    assert applied == [m.version for m in available()]
    async with await _open(database, schema) as conn:
        cur = await conn.execute("SELECT count(*) AS n FROM schema_migrations")
        row = await cur.fetchone()
        assert row is not None and row["n"] == len(available())


async def test_a_migrated_schema_has_the_expected_objects(settings: Settings) -> None:
    assert settings.database_url is not None
    async with await _open(settings.database_url, settings.schema) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (settings.schema,),
        )
        tables = {r["table_name"] for r in await cur.fetchall()}
        assert {
            "jobs",
            "key_versions",
            "idempotency_keys",
            "dead_letters",
            "stale_writes",
            "rescues",
            "schema_migrations",
            "console_sessions",
        } <= tables

        cur = await conn.execute(
            "SELECT c.relname, i.indisunique AS is_unique, "
            "pg_get_expr(i.indpred, i.indrelid) AS predicate "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s",
            (settings.schema,),
        )
        indexes = {r["relname"]: r for r in await cur.fetchall()}
        active = indexes["jobs_one_active_per_key"]
        assert active["is_unique"]
        assert "waiting" in active["predicate"] and "running" in active["predicate"]
        assert "succeeded" not in active["predicate"]
        assert indexes["jobs_version_per_key"]["is_unique"]
        assert indexes["jobs_version_per_key"]["predicate"] is not None

        cur = await conn.execute(
            "SELECT conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
            "WHERE n.nspname = %s AND c.contype = 'c'",
            (settings.schema,),
        )
        checks = {r["conname"] for r in await cur.fetchall()}
        assert {
            "attempt_bounded",
            "lease_iff_running",
            "running_was_claimed",
            "finished_iff_terminal",
            "payload_is_object",
        } <= checks

        cur = await conn.execute(
            "SELECT reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = 'jobs'",
            (settings.schema,),
        )
        row = await cur.fetchone()
        assert row is not None
        assert any(o.startswith("autovacuum_vacuum_scale_factor=") for o in row["reloptions"])


IMPOSSIBLE = [
    ("INSERT INTO jobs (kind, state) VALUES ('k', 'running')", "lease_iff_running"),
    ("INSERT INTO jobs (kind, attempt) VALUES ('k', 4)", "attempt_bounded"),
    ("INSERT INTO jobs (kind, state) VALUES ('k', 'succeeded')", "finished_iff_terminal"),
    ("INSERT INTO jobs (kind, payload) VALUES ('k', '[1]')", "payload_is_object"),
    (
        "INSERT INTO jobs (kind, state, lease_owner, lease_expires_at) "
        "VALUES ('k', 'running', 'w', now())",
        "running_was_claimed",
    ),
]


async def test_the_database_itself_refuses_impossible_jobs(settings: Settings) -> None:
    assert settings.database_url is not None
    async with await _open(settings.database_url, settings.schema) as conn:
        for statement, constraint in IMPOSSIBLE:
            with pytest.raises(psycopg.errors.CheckViolation) as caught:
                await conn.execute(statement.encode())
            assert caught.value.diag.constraint_name == constraint
        cur = await conn.execute("SELECT count(*) AS n FROM jobs")
        row = await cur.fetchone()
        assert row is not None and row["n"] == 0


async def test_a_second_active_job_per_key_is_refused_by_the_database(
    settings: Settings,
) -> None:
    assert settings.database_url is not None
    async with await _open(settings.database_url, settings.schema) as conn:
        await conn.execute("INSERT INTO jobs (kind, key) VALUES ('k', 'a')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            await conn.execute("INSERT INTO jobs (kind, key, version) VALUES ('k', 'a', 2)")
        # Once the first is finished, a new version is welcome.
        await conn.execute("UPDATE jobs SET state = 'succeeded', finished_at = now()")
        await conn.execute("INSERT INTO jobs (kind, key, version) VALUES ('k', 'a', 2)")
        # But a version number is never given twice.
        await conn.execute("UPDATE jobs SET state = 'succeeded', finished_at = now()")
        with pytest.raises(psycopg.errors.UniqueViolation):
            await conn.execute("INSERT INTO jobs (kind, key, version) VALUES ('k', 'a', 2)")


async def test_every_named_query_prepares_against_the_migrated_schema(
    settings: Settings,
) -> None:
    assert settings.database_url is not None
    names = sql.names()
    assert len(names) > 10
    failures: dict[str, str] = {}
    async with await _open(settings.database_url, settings.schema) as conn:
        # The session's temporary tables, as the code creates them before using them.
        await conn.execute(sql.query("ingest_stage_buffer"))
        for index, name in enumerate(names):
            text = sql.text(name)
            # Identifier placeholders get a name that exists (a table, a channel, ...);
            # other braces are SQL text (a '{}' JSON literal) and stay as they are.
            fields = set(re.findall(r"\{(\w+)\}", _strip_comments(text)))
            if fields:
                composed = sql.query_with_identifiers(name, **{f: "jobs" for f in fields})
                text = composed.as_string(conn)
            order: list[str] = []

            def number(match: re.Match[str], order: list[str] = order) -> str:
                if match.group(1) not in order:
                    order.append(match.group(1))
                return f"${order.index(match.group(1)) + 1}"

            body = _PARAM.sub(number, text)
            try:
                if _COPY.match(_strip_comments(body)):
                    # COPY cannot be prepared: open it (the table and columns are
                    # checked), send nothing, and roll back.
                    async with (
                        conn.transaction(force_rollback=True),
                        conn.cursor().copy(body.encode()),
                    ):
                        pass
                elif _VACUUM.match(_strip_comments(body)):
                    assert not order, f"{name}: a utility statement cannot take parameters"
                    await conn.execute(body.encode())
                elif _UTILITY.match(_strip_comments(body)):
                    assert not order, f"{name}: a utility statement cannot take parameters"
                    async with conn.transaction(force_rollback=True):
                        await conn.execute(body.encode())
                else:
                    statement = f"h_probe_{index}"
                    await conn.execute(f"PREPARE {statement} AS {body}".encode())
                    await conn.execute(f"DEALLOCATE {statement}".encode())
            except psycopg.Error as exc:
                failures[name] = str(exc).splitlines()[0]
    assert not failures, "\n".join(f"{n}: {why}" for n, why in sorted(failures.items()))
