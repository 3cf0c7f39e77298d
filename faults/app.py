"""The job kinds of a fault run, imported by worker processes as ``faults.app:APP``.

Every handler run (a) appends to the unfenced ``fault_executions`` log on its own
connection, then, when it succeeds, (b) calls the idempotency-keyed HTTP sink with the
job id as key and (c) records its effect in ``fault_effects`` inside ``ctx.transaction()``,
so the effect row and the job's fenced completion commit together or not at all.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from faults.queries import query
from herald import Backoff, Herald, JobContext
from herald.db import AsyncConn, conninfo

APP = Herald()
QUICK = Backoff(base=0.2, factor=2.0, cap=1.0, jitter=0.1)
PUBLISH_ATTEMPTS = 5
FAILING_ATTEMPTS = 3
# How long a log write keeps trying while PostgreSQL is down (crash scenarios).
LOG_PATIENCE = 15.0


class _Resources:
    """Per-process connections of the handlers, opened on first use."""

    pool: AsyncConnectionPool[AsyncConn] | None = None
    http: httpx.AsyncClient | None = None

    @classmethod
    async def get_pool(cls) -> AsyncConnectionPool[AsyncConn]:
        if cls.pool is None:
            info = conninfo(
                os.environ["HERALD_DATABASE_URL"],
                os.environ.get("HERALD_SCHEMA", "herald"),
                "faults-log",
            )
            pool = AsyncConnectionPool(
                info,
                min_size=1,
                max_size=4,
                kwargs={"autocommit": True, "row_factory": dict_row},
                connection_class=psycopg.AsyncConnection[dict[str, Any]],
                check=AsyncConnectionPool.check_connection,  # drop connections a crash broke
                open=False,
                name="faults-log",
            )
            await pool.open(wait=False)
            cls.pool = pool
        return cls.pool

    @classmethod
    def get_http(cls) -> httpx.AsyncClient:
        if cls.http is None:
            cls.http = httpx.AsyncClient(timeout=10.0)
        return cls.http


# Made at import, before the worker claims anything: building the client's TLS context
# takes the event loop for a second or more on a loaded machine, which the first
# handler would otherwise pay with its lease unconfirmed (and fence itself).
_Resources.get_http()


async def _log(name: str, params: dict[str, Any]) -> Any:
    """Run one log statement, retrying through a database outage for a while."""
    pool = await _Resources.get_pool()
    deadline = time.monotonic() + LOG_PATIENCE
    while True:
        try:
            async with pool.connection(timeout=LOG_PATIENCE) as conn:
                cur = await conn.execute(query(name), params)
                return await cur.fetchone() if cur.description else None
        except (psycopg.OperationalError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


class _Execution:
    def __init__(self, ctx: JobContext, row_id: int) -> None:
        self.ctx = ctx
        self.row_id = row_id
        self.ended = False

    async def end(self, outcome: str) -> None:
        if self.ended:
            return
        self.ended = True
        await _log(
            "execution_end",
            {
                "id": self.row_id,
                "outcome": outcome,
                "job_id": self.ctx.job_id,
                "fence": self.ctx.fence,
            },
        )


@asynccontextmanager
async def _execution(ctx: JobContext, step: str | None = None) -> AsyncIterator[_Execution]:
    row = await _log(
        "execution_start",
        {
            "job_id": ctx.job_id,
            "attempt": ctx.attempt,
            "fence": ctx.fence,
            "step": step,
            "worker": ctx.worker_id,
            "pid": os.getpid(),
        },
    )
    run = _Execution(ctx, int(row["id"]))
    try:
        yield run
    except BaseException as exc:
        if not run.ended:
            # Shielded: a handler cancelled for a lost lease still gets its line written.
            await asyncio.shield(run.end(type(exc).__name__))
        raise
    await run.end("returned")


async def _deliver(ctx: JobContext) -> None:
    ctx.ensure_lease()  # no external call from an attempt whose lease may have run out
    response = await _Resources.get_http().post(
        os.environ["FAULTS_SINK_URL"],
        headers={"Idempotency-Key": str(ctx.job_id)},
        content=json.dumps({"attempt": ctx.attempt, "fence": ctx.fence}),
    )
    response.raise_for_status()


async def _complete(ctx: JobContext, run: _Execution) -> None:
    """Sink call, then the effect row and the completion in one fenced transaction."""
    await _deliver(ctx)
    await run.end("completing")  # read the lease while this fence is still current
    async with ctx.transaction() as conn:
        await conn.execute(
            query("record_effect"),
            {
                "job_id": ctx.job_id,
                "attempt": ctx.attempt,
                "fence": ctx.fence,
                "worker": ctx.worker_id,
            },
        )


def _document(payload: dict[str, Any]) -> dict[str, Any]:
    """Decode the job's document; a poison payload fails here, on every attempt."""
    doc = json.loads(payload["doc"])
    if not isinstance(doc, dict):
        raise ValueError("the document must be a JSON object")
    return doc


@APP.task("publish", max_attempts=PUBLISH_ATTEMPTS, backoff=QUICK)
async def publish(ctx: JobContext, payload: dict[str, Any]) -> None:
    async with _execution(ctx) as run:
        if payload.get("crash"):
            os._exit(70)  # a poison job: takes its whole worker down, on every attempt
        _document(payload)
        await asyncio.sleep(float(payload["ms"]) / 1000)
        await _complete(ctx, run)


pipeline = APP.pipeline(
    "publish_pipeline", steps=["render", "deliver"], max_attempts=PUBLISH_ATTEMPTS, backoff=QUICK
)


@pipeline.step("render")
async def render(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    async with _execution(ctx, "render"):
        doc = _document(payload)
        await asyncio.sleep(float(payload["ms"]) / 2000)
        return {"rendered": len(doc), "rendered_on_attempt": ctx.attempt}


@pipeline.step("deliver")
async def deliver(ctx: JobContext, payload: dict[str, Any]) -> None:
    async with _execution(ctx, "deliver") as run:
        if "rendered" not in ctx.checkpoint:
            raise RuntimeError("deliver ran without the render step's checkpoint")
        await asyncio.sleep(float(payload["ms"]) / 2000)
        await _complete(ctx, run)


@APP.task("always_fails", max_attempts=FAILING_ATTEMPTS, backoff=QUICK)
async def always_fails(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A deterministic failure: it can only end dead-lettered."""
    async with _execution(ctx):
        await asyncio.sleep(float(payload["ms"]) / 1000)
        raise RuntimeError(f"deterministic failure (attempt {ctx.attempt})")
