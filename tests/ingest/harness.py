"""Shared pieces of the ingestion tests: an application, a provider, a worker until done."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from herald.client import Client
from herald.config import Settings
from herald.db import AsyncConn, Row, connect, conninfo
from herald.ingest.jobs import IngestConfig, register_ingest
from herald.ingest.pacing import PacingConfig
from herald.ingest.providers import Provider, ProviderSpec, save_provider
from herald.ops.audit import Note
from herald.registry import Herald
from herald.rows import to_dict
from herald.states import ACTIVE_JOB_STATES
from herald.worker import Worker
from tests.eventually import eventually

NOTE = Note("test", "testing")
# No lowered priority: the tests run workers in the test process itself.
FAST = IngestConfig(
    processors=2, batch=200, stuck_after=2.0, duty_every=0.5, busy_snooze=0.2,
    pacing=PacingConfig(nice=0),
)  # fmt: skip


def ingest_app(settings: Settings, config: IngestConfig = FAST) -> Herald:
    app = Herald()
    register_ingest(app, settings, config)
    return app


async def open_conn(settings: Settings) -> AsyncConn:
    assert settings.database_url is not None
    return await connect(conninfo(settings.database_url, settings.schema))


async def add_provider(conn: AsyncConn, name: str, url: str, **options: Any) -> Provider:
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

    async def probe() -> Row | None:
        cur = await conn.execute(
            "SELECT * FROM ingest_runs WHERE (%s::bigint IS NULL OR id = %s) "
            "ORDER BY id DESC LIMIT 1",
            (run_id, run_id),
        )
        row = await cur.fetchone()
        return row if row is not None and row["state"] in states else None

    return await eventually(probe, what=f"run {run_id} to reach {states}", within=within)


async def wait_for_job(client: Client, job_id: int, within: float = 60) -> Row:
    async def probe() -> Row | None:
        job = await client.get_job(job_id)
        assert job is not None
        return None if job.state in ACTIVE_JOB_STATES else to_dict(job)

    return await eventually(probe, what=f"job {job_id} to finish", within=within)


async def canonical(conn: AsyncConn, provider: str) -> dict[tuple[str, str], Row]:
    cur = await conn.execute(
        "SELECT base_plan_id, plan_id, title, starts_at, ends_at, sell_mode, ever_online, "
        "min_price, max_price, zones, first_seen_at, last_seen_at FROM ingest_plans "
        "WHERE provider = %s",
        (provider,),
    )
    return {(r["base_plan_id"], r["plan_id"]): r for r in await cur.fetchall()}


async def fake_fetch_job(conn: AsyncConn, provider: str) -> tuple[int, int]:
    """A running ``ingest.fetch`` job row (id, fence), as a worker's claim leaves it."""
    cur = await conn.execute(
        "INSERT INTO jobs (kind, key, version, state, attempt, fence, lease_owner, "
        "lease_expires_at, attempted_at) VALUES ('ingest.fetch', %s, "
        "(SELECT count(*) + 1 FROM jobs WHERE kind = 'ingest.fetch' AND key = %s), 'running', "
        "1, 1, 'test', herald_now() + interval '1 hour', herald_now()) RETURNING id, fence",
        (provider, provider),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["id"]), int(row["fence"])


async def end_fake_job(conn: AsyncConn, job_id: int) -> None:
    await conn.execute(
        "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, "
        "finished_at = herald_now() WHERE id = %s",
        (job_id,),
    )


async def stage_snapshot(
    conn: AsyncConn, provider: str, spec: Any, version: int, *, batch: int = 500
) -> int:
    """Stage snapshot ``version`` of ``spec`` as a fetch would (no HTTP); the staged run's id."""
    from herald.ingest.fetch import Batch
    from herald.ingest.formats import new_parser
    from herald.ingest.sandbox import snapshot_chunks
    from herald.ingest.staging import RunStager, mark_staged, start_run

    job_id, fence = await fake_fetch_job(conn, provider)
    run = await start_run(conn, provider, job_id, fence)
    stager = RunStager(conn, int(run["id"]), provider, fence)
    parser = new_parser("event-plans")
    for chunk in snapshot_chunks(spec, version):
        parser.feed(chunk)
    parser.close()
    records, rejected = parser.take()
    for start in range(0, len(records), batch):
        await stager(Batch(records[start : start + batch], rejected if start == 0 else []))
    assert await mark_staged(conn, int(run["id"]), fence, bytes_read=0, attempts=1) is not None
    await end_fake_job(conn, job_id)
    return int(run["id"])
