"""Test fixtures: a real PostgreSQL and a fresh, migrated schema per test.

``HERALD_TEST_DATABASE_URL`` selects a running server; otherwise the embedded PostgreSQL
is booted once under ``.herald-test/`` and reused by later runs. Each test gets its own
schema (created, migrated, dropped), which is cheap and isolates tests completely.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from herald.client import Client
from herald.config import Settings
from herald.db import connect, conninfo, database_url
from herald.migrate import migrate
from tests.support import APP

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def database() -> Iterator[str]:
    url = os.environ.get("HERALD_TEST_DATABASE_URL")
    if url:
        yield url
        return
    data_dir = ROOT / ".herald-test"
    data_dir.mkdir(exist_ok=True)
    # Test processes (xdist workers) share the one server: the first boots it.
    with (data_dir / "boot.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            found = database_url(Settings(data_dir=data_dir))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    yield found


@pytest.fixture
def schema_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def settings(database: str, schema_name: str) -> AsyncIterator[Settings]:
    conn = await connect(conninfo(database, schema_name))
    try:
        await migrate(conn, schema_name)
        yield Settings(
            database_url=database,
            schema=schema_name,
            lease=5.0,
            poll_interval=0.2,
            rescue_interval=0.2,
            shutdown_grace=5.0,
        )
    finally:
        await conn.execute(
            psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                psycopg.sql.Identifier(schema_name)
            )
        )
        await conn.close()


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[Client]:
    c = await Client.open(APP, settings)
    try:
        yield c
    finally:
        await c.close()
