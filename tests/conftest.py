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
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.sql import SQL, Identifier

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


@dataclass(frozen=True)
class SourceRole:
    """A least-privilege role for database sources: it reads one schema of its own."""

    url: str
    role: str
    schema: str


@pytest.fixture
def source_role(database: str) -> Iterator[SourceRole]:
    """A login role that may read ``<schema>.measures`` (4 rows) and nothing else, and
    use a sequence there (a read-only transaction must still refuse to advance it)."""
    tag = uuid.uuid4().hex[:10]
    role, schema = Identifier(f"herald_src_{tag}"), Identifier(f"src_{tag}")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(SQL("CREATE ROLE {} LOGIN").format(role))
        conn.execute(SQL("CREATE SCHEMA {}").format(schema))
        conn.execute(
            SQL(
                "CREATE TABLE {}.measures AS SELECT g AS id, 'm' || g AS name "
                "FROM generate_series(1, 4) g"
            ).format(schema)
        )
        conn.execute(SQL("CREATE SEQUENCE {}.counter").format(schema))
        conn.execute(SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
        conn.execute(SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, role))
        conn.execute(SQL("GRANT USAGE, UPDATE ON {}.counter TO {}").format(schema, role))
    try:
        yield SourceRole(
            make_conninfo(database, user=f"herald_src_{tag}"), f"herald_src_{tag}", f"src_{tag}"
        )
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(SQL("DROP SCHEMA {} CASCADE").format(schema))
            conn.execute(SQL("DROP OWNED BY {}").format(role))
            conn.execute(SQL("DROP ROLE {}").format(role))


# The system catalogs every test's schema churns (created, migrated, dropped): hundreds
# of schemas per run leave their dead rows here.
_CHURNED_CATALOGS = (
    "pg_class, pg_attribute, pg_attrdef, pg_depend, pg_type, pg_constraint, pg_index, "
    "pg_policy, pg_proc, pg_trigger, pg_namespace, pg_rewrite, pg_sequence, pg_description, "
    "pg_statistic, pg_init_privs, pg_shdepend"
)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a server with autovacuum off, vacuum the catalogs this run churned: otherwise
    they grow by every run's dead rows and each test's migration gets slower (several
    times slower after a day of runs). Once, from the controlling process; a role that
    may not vacuum them only gets the server's warning."""
    url = os.environ.get("HERALD_TEST_DATABASE_URL")
    if not url or hasattr(session.config, "workerinput"):
        return
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SHOW autovacuum").fetchone()
            if row is not None and row[0] == "off":
                names = ", ".join(f"pg_catalog.{n.strip()}" for n in _CHURNED_CATALOGS.split(","))
                conn.execute(f"VACUUM {names}")
    except psycopg.Error as exc:  # housekeeping only: never fails the run
        print(f"note: could not vacuum the test database's catalogs: {exc}")
