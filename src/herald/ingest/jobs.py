"""The ingestion application on the engine: ``ingest.fetch``, ``ingest.process``, a duty.

``ingest.fetch`` (key = provider name, queue ``ingest-fetch``): at most one active per
provider (the engine's one-active-job-per-key admission: concurrent triggers and
schedules get the active job), and the attempt holds the provider's advisory lock for
the whole fetch, so even an attempt whose lease lapsed while it still runs keeps a later
one out. It streams the snapshot into a run (:mod:`herald.ingest.staging`), then marks
the run staged and admits ``processors`` ``ingest.process`` jobs in its fenced
completion transaction. A broken document, a partial body or a refused request fails
the run (the job succeeds: the run records the failure); a transport failure fails the
run and the job is retried (after the provider's Retry-After when it sent one).

``ingest.process`` (key = ``run:<id>:<slot>``, queue ``ingest-process``) drains its run
(:mod:`herald.ingest.processing`). The duty ``ingest.requeue`` requeues rows stuck in
processing, re-admits processing for staged runs nobody works on, and prunes expired
quarantine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

from herald import sql, tenancy
from herald.client import Client
from herald.config import ConfigError, Settings
from herald.context import JobContext
from herald.db import AsyncConn, connect, conninfo, database_url
from herald.errors import LeaseLost, Permanent, Retry, Snooze
from herald.ingest.errors import (
    DeadlineExceeded,
    FetchError,
    HttpStatusError,
    PartialFetch,
    SnapshotRefused,
    TransportError,
)
from herald.ingest.fetch import fetch_snapshot
from herald.ingest.pacing import Pacer, PacingConfig, lower_priority
from herald.ingest.processing import drain_run, requeue_stuck
from herald.ingest.providers import FETCH, PROCESS, UnknownProvider, fetch_settings
from herald.ingest.staging import RunStager, StagingLimits, fail_run, mark_staged, start_run
from herald.registry import Herald

log = logging.getLogger(__name__)

FETCH_QUEUE = "ingest-fetch"
PROCESS_QUEUE = "ingest-process"


def _number(env: dict[str, str], name: str, default: float, low: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < low:
        raise ConfigError(f"{name} must be at least {low:g}")
    return value


@dataclass(frozen=True)
class IngestConfig:
    """``HERALD_INGEST_*``: processing fan-out, batches, retries, requeue bound, pacing."""

    processors: int = 4  # ingest.process jobs admitted per staged run
    batch: int = 4000  # staged rows per batch (per-row cost falls with larger batches)
    row_attempts: int = 3  # attempts per staged row before it ends failed
    stuck_after: float = 60.0  # seconds in processing before a row is requeued
    duty_every: float = 5.0  # seconds between passes of the ingest.requeue duty
    busy_snooze: float = 5.0  # seconds a fetch waits when another holds the provider
    quarantine_per_run: int = 1000
    quarantine_days: float = 14.0
    keep_rows: float = 86_400.0  # seconds staged rows of a finished run are kept
    pacing: PacingConfig = field(default_factory=PacingConfig)  # how ingestion yields to search

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> IngestConfig:
        env = dict(os.environ if environ is None else environ)
        return cls(
            processors=int(_number(env, "HERALD_INGEST_PROCESSORS", 4, 1)),
            batch=int(_number(env, "HERALD_INGEST_BATCH", 4000, 1)),
            row_attempts=int(_number(env, "HERALD_INGEST_ROW_ATTEMPTS", 3, 1)),
            stuck_after=_number(env, "HERALD_INGEST_STUCK_AFTER", 60.0, 0.1),
            duty_every=_number(env, "HERALD_INGEST_DUTY_EVERY", 5.0, 0.1),
            keep_rows=_number(env, "HERALD_INGEST_KEEP_ROWS", 86_400.0, 0),
            pacing=PacingConfig.from_env(env),
        )

    @property
    def staging(self) -> StagingLimits:
        return StagingLimits(self.row_attempts, self.quarantine_per_run, self.quarantine_days)


@dataclass
class IngestRuntime:
    settings: Settings
    config: IngestConfig
    app: Herald

    @property
    def conninfo(self) -> str:
        url = database_url(self.settings)
        return conninfo(url, self.settings.schema, "herald-ingest")

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConn]:
        conn = await connect(self.conninfo)
        try:
            # The current tenant (a job's, or the one a duty's pass is for) under the
            # runtime role: row-level security applies, and inserts are that tenant's.
            await tenancy.tell(conn)
            yield conn
        finally:
            await conn.close()

    def admission(self) -> Client:
        """A client used only to admit jobs on a given connection (its pool stays closed)."""
        return Client(self.app, self.settings, self.conninfo)


_RUNTIMES: weakref.WeakKeyDictionary[Herald, IngestRuntime] = weakref.WeakKeyDictionary()


def ingest_runtime(app: Herald) -> IngestRuntime:
    try:
        return _RUNTIMES[app]
    except KeyError:
        raise LookupError("the ingest kinds are not registered on this application") from None


def register_ingest(
    app: Herald, settings: Settings, config: IngestConfig | None = None
) -> IngestRuntime:
    """Register ``ingest.fetch``, ``ingest.process`` and the ``ingest.requeue`` duty."""
    if app in _RUNTIMES:
        raise ValueError("the ingest kinds are already registered on this application")
    runtime = IngestRuntime(settings, config or IngestConfig.from_env(), app)
    _RUNTIMES[app] = runtime

    # Internal kinds: fetches are triggered through the provider routes and commands.
    @app.task(FETCH, queue=FETCH_QUEUE, max_attempts=5, timeout=None, api_scope=None)
    async def fetch(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        provider = payload.get("provider") or ctx.key
        if not isinstance(provider, str) or not provider:
            raise Permanent("a fetch job needs the provider (payload provider or key)")
        return await run_fetch(runtime, ctx, provider)

    @app.task(PROCESS, queue=PROCESS_QUEUE, max_attempts=10, timeout=None, api_scope=None)
    async def process(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = payload.get("run_id")
        if not isinstance(run_id, int):
            raise Permanent("a processing job needs the run id (payload run_id)")
        return await run_process(runtime, ctx, run_id)

    @app.duty("ingest.requeue", every=runtime.config.duty_every)
    async def requeue() -> None:
        await housekeeping_pass(runtime)

    return runtime


def _lease_check(ctx: JobContext) -> Any:
    async def checkpoint() -> None:
        if ctx.lease_lost:
            raise LeaseLost(f"job {ctx.job_id} lost its lease (fence {ctx.fence})")

    return checkpoint


async def run_fetch(runtime: IngestRuntime, ctx: JobContext, provider: str) -> dict[str, Any]:
    """One fetch attempt of ``provider`` (see the module docstring for its outcomes)."""
    async with runtime.connection() as conn:
        cur = await conn.execute(sql.query("ingest_fetch_lock"), {"provider": provider})
        locked = await cur.fetchone()
        if locked is None or not locked["locked"]:
            raise Snooze(runtime.config.busy_snooze, f"another fetch of {provider} is running")
        try:
            return await _fetch_locked(runtime, ctx, conn, provider)
        finally:
            # Closing the session would release the lock too; a broken one is closed.
            with contextlib.suppress(psycopg.Error):
                await conn.execute(sql.query("ingest_fetch_unlock"), {"provider": provider})


async def _fetch_locked(
    runtime: IngestRuntime, ctx: JobContext, conn: AsyncConn, provider: str
) -> dict[str, Any]:
    try:
        fetching = await fetch_settings(conn, provider)
    except UnknownProvider as exc:
        raise Permanent(str(exc)) from None
    lower_priority(runtime.config.pacing.nice)
    run = await start_run(conn, provider, ctx.job_id, ctx.fence)
    run_id = int(run["id"])
    stager = RunStager(conn, run_id, provider, ctx.fence, runtime.config.staging)
    log.info("fetch %s: run %d started", provider, run_id)
    try:
        result = await fetch_snapshot(
            fetching.url,
            fetching.format,
            stager,
            policy=fetching.policy,
            auth=fetching.auth,
            context=fetching.context,
            checkpoint=_lease_check(ctx),
            pace=Pacer.on(conn, runtime.config.pacing).breathe,
        )
    except LeaseLost:
        raise  # the run stays fetching; the next attempt abandons it
    except (PartialFetch, SnapshotRefused, HttpStatusError, DeadlineExceeded) as exc:
        await fail_run(conn, run_id, ctx.fence, str(exc), exc.attempts)
        log.warning("fetch %s: run %d failed: %s", provider, run_id, exc)
        return {"run_id": run_id, "state": "failed", "error": str(exc)}
    except TransportError as exc:
        await fail_run(conn, run_id, ctx.fence, str(exc), exc.attempts)
        raise Retry(str(exc), delay=exc.retry_after) from None
    except FetchError as exc:
        await fail_run(conn, run_id, ctx.fence, str(exc), exc.attempts)
        raise
    except Exception as exc:
        if not conn.closed:
            await fail_run(conn, run_id, ctx.fence, f"{type(exc).__name__}: {exc}", 0)
        raise
    outcome = {
        "run_id": run_id,
        "state": "staged",
        "rows": stager.staged,
        "rejected": stager.rejected,
        "bytes": result.bytes,
        "seconds": round(result.seconds, 3),
    }
    admission = runtime.admission()
    async with ctx.transaction(outcome) as tx:
        staged = await mark_staged(
            tx, run_id, ctx.fence, bytes_read=result.bytes, attempts=result.attempts
        )
        if staged is None:
            raise LeaseLost(f"run {run_id} is no longer this attempt's")
        for slot in range(runtime.config.processors if stager.staged else 1):
            await admission.enqueue(
                PROCESS, {"run_id": run_id}, key=f"run:{run_id}:{slot}", conn=tx
            )
    log.info("fetch %s: run %d staged %d rows", provider, run_id, stager.staged)
    return outcome


async def run_process(runtime: IngestRuntime, ctx: JobContext, run_id: int) -> dict[str, Any]:
    token = f"{ctx.worker_id}/{ctx.job_id}.{ctx.fence}"
    lower_priority(runtime.config.pacing.nice)
    async with runtime.connection() as conn:
        stats = await drain_run(
            conn,
            run_id,
            token,
            batch=runtime.config.batch,
            poll=min(1.0, runtime.config.stuck_after / 4),
            checkpoint=_lease_check(ctx),
            # Not below 10 s: a busy event loop must not cost a healthy batch its session.
            hold_limit=max(10.0, runtime.config.stuck_after),
            pace=Pacer.on(conn, runtime.config.pacing).breathe,
        )
    return {
        "run_id": run_id,
        "done": stats.done,
        "changed": stats.changed,
        "row_failures": stats.row_failures,
        "processed": stats.processed_run is not None,
    }


async def housekeeping_pass(runtime: IngestRuntime) -> dict[str, int]:
    """Requeue stuck rows, re-admit processing for unattended runs, prune expired
    quarantine and the staged rows of runs finished longer than ``keep_rows`` ago."""
    async with runtime.connection() as conn:
        requeued = await requeue_stuck(conn, runtime.config.stuck_after)
        cur = await conn.execute(sql.query("ingest_runs_unattended"), {"kind": PROCESS})
        runs = [int(r["id"]) for r in await cur.fetchall()]
        admission = runtime.admission()
        for run_id in runs:
            await admission.enqueue(PROCESS, {"run_id": run_id}, key=f"run:{run_id}:0", conn=conn)
        cur = await conn.execute(sql.query("ingest_quarantine_prune"), {"limit": 10_000})
        pruned = max(0, cur.rowcount)
        cur = await conn.execute(
            sql.query("ingest_prune_rows"), {"keep_s": runtime.config.keep_rows, "limit": 50_000}
        )
        dropped = max(0, cur.rowcount)
    return {
        "requeued": len(requeued),
        "readmitted": len(runs),
        "pruned_quarantine": pruned,
        "pruned_rows": dropped,
    }
