"""Shared pieces of the ingestion tests: an application, a provider, a worker until done."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from herald.client import Client
from herald.config import Settings
from herald.db import AsyncConn, Row, connect, conninfo
from herald.ingest.jobs import IngestConfig, register_ingest
from herald.ingest.providers import ProviderSpec, save_provider
from herald.ops.audit import Note
from herald.registry import Herald
from herald.worker import Worker

NOTE = Note("test", "testing")
FAST = IngestConfig(processors=2, batch=200, stuck_after=2.0, duty_every=0.5, busy_snooze=0.2)


def ingest_app(settings: Settings, config: IngestConfig = FAST) -> Herald:
    app = Herald()
    register_ingest(app, settings, config)
    return app


async def open_conn(settings: Settings) -> AsyncConn:
    assert settings.database_url is not None
    return await connect(conninfo(settings.database_url, settings.schema))


async def add_provider(conn: AsyncConn, name: str, url: str, **options: Any) -> Row:
    spec = ProviderSpec(
        name=name, url=url, attempts=2, backoff_base=0.05, backoff_cap=0.1, **options
    )
    row, _ = await save_provider(conn, spec, note=NOTE)
    return row


@contextlib.asynccontextmanager
async def running_worker(
    app: Herald, settings: Settings, concurrency: int = 4
) -> AsyncIterator[Worker]:
    worker = Worker(app, settings=settings, concurrency=concurrency)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def wait_for_run(
    conn: AsyncConn, run_id: int | None, states: tuple[str, ...], within: float = 60
) -> Row:
    """The run (``None``: the latest) once it is in one of ``states``."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        cur = await conn.execute(
            "SELECT * FROM ingest_runs WHERE (%s::bigint IS NULL OR id = %s) "
            "ORDER BY id DESC LIMIT 1",
            (run_id, run_id),
        )
        row = await cur.fetchone()
        if row is not None and row["state"] in states:
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} did not reach {states}")


async def wait_for_job(client: Client, job_id: int, within: float = 60) -> Row:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        job = await client.get_job(job_id)
        assert job is not None
        if job["state"] not in ("waiting", "running"):
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


async def canonical(conn: AsyncConn, provider: str) -> dict[tuple[str, str], Row]:
    cur = await conn.execute(
        "SELECT base_plan_id, plan_id, title, starts_at, ends_at, sell_mode, ever_online, "
        "min_price, max_price, zones, first_seen_at, last_seen_at FROM ingest_plans "
        "WHERE provider = %s",
        (provider,),
    )
    return {(r["base_plan_id"], r["plan_id"]): r for r in await cur.fetchall()}
