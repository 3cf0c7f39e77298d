"""The PgQueuer application ``bench_pgqueuer.py`` runs in its worker processes.

Started with PgQueuer's own CLI, as in production::

    PGQUEUER_DSN=postgresql://... python -m pgqueuer run benchmarks.pgqueuer_app:create_pgqueuer

The factory follows PgQueuer's documented worker setup: one asyncpg connection for the
``PgQueuer`` (its queue manager keeps its LISTEN on it). ``bench.noop`` does nothing, so
a drain measures PgQueuer alone. ``bench.stamp`` reads the host's monotonic clock
(system-wide on Linux) as it starts and only then writes the reading, with the payload's
number, to ``bench_stamp`` over a second connection of its own, so the report never
delays the worker's own statements.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import Job, PgQueuer

NOOP = "bench.noop"
STAMP = "bench.stamp"
# bench_pgqueuer.py creates this table in the measurement's schema.
_RECORD_STAMP = "INSERT INTO bench_stamp (n, started) VALUES ($1, $2)"


async def noop(job: Job) -> None:
    return None


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    # The DSN selects the measurement's schema (options=-c search_path=...).
    dsn = os.environ["PGQUEUER_DSN"]
    connection = await asyncpg.connect(dsn)
    reporter = await asyncpg.connect(dsn)
    # A job can start while the previous one still reports (a connection runs one
    # statement at a time); the clock is read before waiting, so that is not measured.
    reporting = asyncio.Lock()

    async def stamp(job: Job) -> None:
        started = time.monotonic()
        async with reporting:
            await reporter.execute(_RECORD_STAMP, json.loads(job.payload or b"{}")["n"], started)

    pgq = PgQueuer.from_asyncpg_connection(connection)
    # Registered by call, not as decorators, so mypy stays strict without pgqueuer installed.
    pgq.entrypoint(NOOP)(noop)
    pgq.entrypoint(STAMP)(stamp)
    try:
        yield pgq
    finally:
        await reporter.close()
        await connection.close()
