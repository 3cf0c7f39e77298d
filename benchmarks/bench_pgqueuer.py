"""PgQueuer on bench_core's four figures, measured the same way against the same server.

Run from the repository root, in an environment with the ``peers`` extra installed
(``pip install -e '.[peers]'``; pgqueuer is never a dependency of Herald itself)::

    HERALD_DATABASE_URL=postgresql://user@host/db python -m benchmarks.bench_pgqueuer
    HERALD_DATABASE_URL=... python -m benchmarks.bench_pgqueuer --only drain --repeat 5

Sizes, options and output follow ``bench_core.py``, so the two print side by side.
``HERALD_DATABASE_URL`` is required (no embedded server here). Every measurement gets a
fresh schema of its own: the connections select it with ``options=-c search_path=...``,
PgQueuer's installer (``Queries.install``) creates its tables there, and the schema is
dropped afterwards. A ``CHECKPOINT`` precedes each measurement, as in bench_core.

PgQueuer is used through its public API (``Queries.enqueue``, ``PgQueuer``) on the
driver it recommends and tries first, asyncpg: the producer is one asyncpg connection
(``Queries(AsyncpgDriver(connection))``, as in its README), and every worker is a
process of its own CLI, ``python -m pgqueuer run benchmarks.pgqueuer_app:create_pgqueuer``
(one asyncpg connection per worker, as its docs recommend for a queue manager; the
application's stamp handler has a second one of its own).

Settings that are not PgQueuer's defaults, and why:

* ``pgq autovac`` (``Queries.optimize_autovacuum``) after install: its docs' checklist
  for production, and Herald's own migration tunes autovacuum on its jobs table too.
* Drain workers run with ``--batch-size 500`` (default 10; ``--batch`` changes it). Its
  performance guide says to raise the batch for short jobs, and 500 is the most a
  Herald worker claims per statement by default, so both claim in batches of the same
  size (PgQueuer's completion log buffer takes the batch size too). Latency runs keep
  PgQueuer's defaults.
* ``--concurrency N`` maps to ``--max-concurrent-tasks N``. The default, 0, keeps
  PgQueuer's default of no cap (bench_core caps each Herald worker at 1000 handlers):
  with a cap, every PgQueuer dequeue first counts the jobs its worker holds.

Durability stays PgQueuer's default, ``durable`` (every table logged, as Herald's are).

Clocks, as in bench_core: admission rates use the host's monotonic clock around the
calls. Drain rates use the database clock, from the first ``picked`` row to the last
``successful`` row of ``pgqueuer_log`` (both stamped ``now()`` by the claim and the
completion statements), so process start-up is not counted. Latency compares the host's
monotonic clock just before ``enqueue`` with the same clock read by the handler as it
starts, which it then writes to a small table over a connection of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import asyncpg
import psycopg
from pgqueuer import AsyncpgDriver, Queries
from psycopg.conninfo import conninfo_to_dict

from benchmarks.bench_core import (
    Measures,
    Processes,
    add_figure_options,
    figures_wanted,
    machine,
    report,
    wait_until_done,
)
from benchmarks.pgqueuer_app import NOOP, STAMP
from herald import loop
from herald.config import Settings
from herald.db import LINK_DEFAULTS, connect, conninfo

ROOT = Path(__file__).resolve().parent.parent
APP = "benchmarks.pgqueuer_app:create_pgqueuer"

# Measurement queries (the benchmark reads PgQueuer's tables directly, like a test would).
# A finished job is deleted from ``pgqueuer`` in the statement that logs it, so an empty
# queue means every completion is recorded.
_PENDING = "SELECT EXISTS (SELECT 1 FROM pgqueuer) AS pending"
_DRAIN_SPAN = """
SELECT count(*) FILTER (WHERE status = 'successful') AS ok,
       extract(epoch FROM max(created) FILTER (WHERE status = 'successful')
                        - min(created) FILTER (WHERE status = 'picked'))::float8 AS span_s
FROM pgqueuer_log
"""
_STAMP_TABLE = "CREATE TABLE bench_stamp (n integer PRIMARY KEY, started float8 NOT NULL)"
_STARTED = "SELECT n, started FROM bench_stamp"
_CHECKPOINT = "CHECKPOINT"
_SETTINGS = """
SELECT current_setting('server_version') AS version,
       current_setting('synchronous_commit') AS sync, current_setting('fsync') AS fsync
"""


# --- plumbing -----------------------------------------------------------------------------


def asyncpg_dsn(url: str, schema: str) -> str:
    """``url`` with the search_path of herald.db.conninfo, as a URL asyncpg reads.

    asyncpg hands query parameters it does not know (``options``, ``application_name``)
    to the server at connection start, as libpq does; the server refuses libpq's own
    link settings (``connect_timeout``, keepalives), so they are left out.
    """
    params = conninfo_to_dict(conninfo(url, schema, "pgqueuer-bench"))
    for name in LINK_DEFAULTS:
        params.pop(name, None)
    return "postgresql://?" + urlencode({k: str(v) for k, v in params.items()}, quote_via=quote)


@dataclass
class Schema:
    """A measurement's schema, with PgQueuer's client (the producer) connected to it."""

    url: str
    name: str
    connection: asyncpg.Connection
    queries: Queries

    @property
    def dsn(self) -> str:
        return asyncpg_dsn(self.url, self.name)

    async def row(self, query: str) -> dict[str, Any]:
        """One row, over a new connection each time, as bench_core's polls do."""
        conn = await connect(conninfo(self.url, self.name))
        async with conn:
            cur = await conn.execute(query)
            row = await cur.fetchone()
        assert row is not None
        return row


@asynccontextmanager
async def fresh_schema(url: str) -> AsyncIterator[Schema]:
    """A new schema with PgQueuer installed by its own installer, dropped afterwards."""
    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = await connect(conninfo(url, name))
    ident = psycopg.sql.Identifier(name)
    try:
        await admin.execute(psycopg.sql.SQL("CREATE SCHEMA {}").format(ident))
        connection = await asyncpg.connect(asyncpg_dsn(url, name))
        try:
            queries = Queries(AsyncpgDriver(connection))
            await queries.install()
            await queries.optimize_autovacuum()
            # Without the privilege the figures include whatever checkpoint falls due.
            with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                await admin.execute(_CHECKPOINT)
            yield Schema(url, name, connection, queries)
        finally:
            await connection.close()
    finally:
        await admin.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
        await admin.close()


class WorkerProcesses(Processes):
    """``count`` ``pgq run`` processes on ``schema``, started and stopped cleanly."""

    def __init__(self, schema: Schema, count: int, args: list[str]):
        super().__init__("pgqueuer-bench-")
        self.schema = schema
        self.count = count
        self.args = args

    def __enter__(self) -> WorkerProcesses:
        return self

    def _spawn(self) -> None:
        env = {**os.environ, "PGQUEUER_DSN": self.schema.dsn}
        self.spawn([sys.executable, "-m", "pgqueuer", "run", APP, *self.args], env, self.count)

    async def start(self, within: float = 30.0) -> None:
        """Start the workers and wait until each one's queue manager runs.

        PgQueuer logs nothing as it starts, but each queue manager sends a listener
        health check (a NOTIFY on its channel) as it starts running, just before its own
        LISTEN, and a NOTIFY names the sending backend: once every worker's connection
        has sent one, all are up, and bench_core's half second covers the rest.
        """
        heard: set[int] = set()

        def on_notify(conn: object, pid: int, channel: str, payload: str) -> None:
            if '"health_check_event"' in payload:
                heard.add(pid)

        channel = self.schema.queries.qbe.settings.channel
        listener = await asyncpg.connect(self.schema.dsn)
        try:
            await listener.add_listener(channel, on_notify)
            self._spawn()
            deadline = time.monotonic() + within
            while len(heard) < self.count:
                self.check_alive(deadline)
                await asyncio.sleep(0.05)
        finally:
            await listener.close()  # it would receive every notification of the run
        await asyncio.sleep(0.5)  # listener connected, first (empty) dequeue done


async def wait_drained(schema: Schema, within: float) -> None:
    async def pending() -> bool:
        return bool((await schema.row(_PENDING))["pending"])

    await wait_until_done(pending, within)


def payload(n: int) -> dict[str, int]:
    return {"n": n}


def encode(p: dict[str, int]) -> bytes:
    # PgQueuer payloads are bytes: the caller encodes, where Herald's client does (and
    # bench_core times it), so the same JSON encoding is timed here.
    return json.dumps(p).encode()


# --- measurements -------------------------------------------------------------------------


async def bench_bulk(url: str, jobs: int, batch: int) -> float:
    """Jobs/s admitted with list ``enqueue`` calls (one statement each) of ``batch`` jobs."""
    async with fresh_schema(url) as schema:
        chunks = [
            [payload(i + j) for j in range(min(batch, jobs - i))] for i in range(0, jobs, batch)
        ]
        start = time.monotonic()
        for chunk in chunks:
            await schema.queries.enqueue(
                [NOOP] * len(chunk), [encode(p) for p in chunk], [0] * len(chunk)
            )
        return jobs / (time.monotonic() - start)


async def bench_single(url: str, jobs: int) -> float:
    """Jobs/s admitted one ``enqueue`` call (one round trip and commit) at a time."""
    async with fresh_schema(url) as schema:
        start = time.monotonic()
        for n in range(jobs):
            await schema.queries.enqueue(NOOP, encode(payload(n)))
        return jobs / (time.monotonic() - start)


async def bench_drain(url: str, jobs: int, processes: int, args: list[str]) -> float:
    """No-op jobs/s run end to end by ``processes`` worker processes.

    The workers start on an empty queue; the jobs then appear in one commit (chunks of
    5,000 in one transaction, like bench_core). The rate is taken on the database clock.
    """
    async with fresh_schema(url) as schema:
        with WorkerProcesses(schema, processes, args) as workers:
            await workers.start()
            async with schema.connection.transaction():
                for i in range(0, jobs, 5000):
                    chunk: list[bytes | None] = [
                        encode(payload(i + j)) for j in range(min(5000, jobs - i))
                    ]
                    await schema.queries.enqueue([NOOP] * len(chunk), chunk, [0] * len(chunk))
            await wait_drained(schema, within=max(60.0, jobs / 200))
        row = await schema.row(_DRAIN_SPAN)
        if row["ok"] != jobs:
            raise RuntimeError(f"expected {jobs} successful jobs, found {row['ok']}")
        return float(jobs / row["span_s"])


async def bench_latency(url: str, samples: int, gap: float) -> tuple[list[float], list[float]]:
    """Enqueue-to-start latencies (ms) of single jobs admitted to an idle worker.

    Also returns how long each ``enqueue`` call itself took (ms): the admission's share.
    """
    async with fresh_schema(url) as schema:
        await schema.connection.execute(_STAMP_TABLE)
        before: dict[int, float] = {}
        admission: list[float] = []
        with WorkerProcesses(schema, 1, []) as workers:  # PgQueuer's defaults
            await workers.start()
            for n in range(samples):
                t0 = time.monotonic()
                await schema.queries.enqueue(STAMP, encode(payload(n)))
                admission.append((time.monotonic() - t0) * 1000)
                before[n] = t0
                await asyncio.sleep(gap)  # the job finishes: the worker is idle again
            await wait_drained(schema, within=60)
        started = {r["n"]: r["started"] for r in await schema.connection.fetch(_STARTED)}
    if set(started) != set(before):
        raise RuntimeError("some latency jobs did not succeed")
    return sorted((started[n] - t0) * 1000 for n, t0 in before.items()), sorted(admission)


# --- reporting ----------------------------------------------------------------------------


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_figure_options(parser)
    parser.add_argument(
        "--concurrency",
        "--max-concurrent-tasks",
        type=int,
        default=0,
        help="drain workers' --max-concurrent-tasks (0: PgQueuer's default, no cap)",
    )
    parser.add_argument(
        "--batch", "--batch-size", type=int, default=500, help="drain workers' --batch-size"
    )
    args = parser.parse_args(argv)
    only = figures_wanted(parser, args)
    url = os.environ.get("HERALD_DATABASE_URL")
    if not url:
        parser.error("set HERALD_DATABASE_URL to the PostgreSQL server to measure against")
    drain_args = ["--batch-size", str(args.batch)]
    if args.concurrency:
        drain_args += ["--max-concurrent-tasks", str(args.concurrency)]

    conn = await connect(url)
    async with conn:
        server = await (await conn.execute(_SETTINGS)).fetchone()
    assert server is not None
    print(f"machine:  {machine()}")
    print(
        f"database: PostgreSQL {server['version']} (HERALD_DATABASE_URL), "
        f"synchronous_commit={server['sync']}, fsync={server['fsync']}"
    )
    print(
        f"peer:     PgQueuer {version('pgqueuer')} on asyncpg {version('asyncpg')}, durable "
        f"tables, pgq autovac; drain workers: pgq run {' '.join(drain_args)}"
    )
    print(f"runs per figure: {args.repeat}\n", flush=True)

    await report(
        args,
        only,
        Measures(
            bulk=lambda: bench_bulk(url, args.bulk_jobs, args.bulk_batch),
            single=lambda: bench_single(url, args.single_jobs),
            drain=lambda count: bench_drain(url, args.drain_jobs, count, drain_args),
            latency=lambda: bench_latency(url, args.latency_samples, gap=0.02),
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(loop.run(main(), Settings.from_env().event_loop))
