"""Herald through PgBouncer in transaction mode (``Settings.pooled``): migrations under a
transaction-scoped lock, no startup options, no server-side prepared statements, the
schema as the role's search_path, LISTEN replaced by polling."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import psycopg
import pytest
from psycopg import sql as psql

from herald import Client, Settings
from herald.db import connect, conninfo
from herald.migrate import available, migrate
from tests.pgbouncer import pgbouncer
from tests.support import APP, running_worker, wait_for_job

pytestmark = pytest.mark.slow


@pytest.fixture
def role(database: str) -> Iterator[tuple[str, str]]:
    """A login role whose search_path is a fresh schema: what a pooled deployment sets."""
    name = f"p_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(psql.SQL("CREATE ROLE {} LOGIN SUPERUSER").format(psql.Identifier(name)))
        conn.execute(
            psql.SQL("ALTER ROLE {} SET search_path = {}, public").format(
                psql.Identifier(name), psql.Identifier(name)
            )
        )
    try:
        yield name, name  # the role, and its schema
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(psql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psql.Identifier(name)))
            conn.execute(psql.SQL("DROP ROLE IF EXISTS {}").format(psql.Identifier(name)))


@pytest.fixture
async def pooled(database: str, role: tuple[str, str]) -> AsyncIterator[Settings]:
    user, schema = role
    with pgbouncer(database, user, pool_size=3) as url:
        yield Settings(
            database_url=url,
            schema=schema,
            pooled=True,
            lease=5.0,
            poll_interval=0.2,
            rescue_interval=0.2,
            shutdown_grace=5.0,
        )


async def _migrate(settings: Settings) -> list[int]:
    assert settings.database_url is not None
    info = conninfo(settings.database_url, settings.schema, settings=settings)
    async with await connect(info, pooled=True) as conn:
        return [m.version for m in await migrate(conn, settings.schema, pooled=True)]


async def test_concurrent_migrations_through_the_pooler_apply_each_once(
    pooled: Settings,
) -> None:
    results = await asyncio.gather(*(_migrate(pooled) for _ in range(4)))
    assert sorted(v for r in results for v in r) == [m.version for m in available()]
    # The lock was released with its transaction: the next migrator is not blocked.
    assert await asyncio.wait_for(_migrate(pooled), 10) == []


async def test_a_worker_runs_every_job_through_the_pooler(pooled: Settings) -> None:
    await _migrate(pooled)
    client = await Client.open(APP, pooled)
    try:
        jobs = [await client.enqueue("echo", {"n": n}) for n in range(40)]
        async with running_worker(pooled, concurrency=8):
            done = [await wait_for_job(client, job.id, limit=60) for job in jobs]
    finally:
        await client.close()
    assert {row["state"] for row in done} == {"succeeded"}
    assert [row["result"]["echo"]["n"] for row in done] == list(range(40))
