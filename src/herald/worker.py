"""The worker: claims batches, runs handlers under leases, records outcomes in batches.

Moving parts, each a small loop on one asyncio event loop:

* fetcher   - claims up to the free capacity with one SKIP LOCKED statement; wakes on
              NOTIFY (a hint) and on its poll timer (the guarantee);
* listener  - holds LISTEN on its own connection and reconnects forever; a reconnect
              triggers a poll, since notifications sent meanwhile are gone;
* heartbeat - extends every lease this worker holds in one statement every lease/3; a
              job missing from the answer lost its lease and its handler is cancelled;
* completer - writes finished attempts in batches with one fenced statement;
* maintenance (rescuer, pruner) - see :mod:`herald.maintenance`.

Handlers run outside any database transaction. Database time decides every lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn, connect, conninfo, database_url, make_pool
from herald.encoding import dump_result, storable
from herald.errors import Cancel, LeaseLost, Permanent, Retry, Snooze
from herald.maintenance import Maintenance
from herald.migrate import require_migrated
from herald.registry import Herald, Kind, call

log = logging.getLogger(__name__)

_SHUTDOWN_ERROR = {"kind": "shutdown", "message": "worker shut down before the job finished"}


@dataclass
class WorkerStats:
    """Counters of this worker process (the database holds the durable ones)."""

    claimed: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    snoozed: int = 0
    cancelled: int = 0
    lease_lost: int = 0
    stale_writes: int = 0
    db_errors: int = 0


@dataclass
class _Running:
    ctx: JobContext
    task: asyncio.Task[None] | None = None


@dataclass
class _Outcome:
    job_id: int
    fence: int
    outcome: str
    delay: float | None = None
    error: str | None = None
    result: str | None = None


class Worker:
    """Runs jobs of the given queues with at most ``concurrency`` handlers at once."""

    def __init__(
        self,
        app: Herald,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 10,
        settings: Settings | None = None,
        batch: int | None = None,
        maintenance: bool = True,
        name: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.app = app
        self.settings = settings or Settings.from_env()
        self.queues = list(queues or app.queues() or ["default"])
        self.concurrency = concurrency
        # Claims are batched up to the free capacity: big batches amortise each statement's
        # commit, which is what bounds the throughput of short jobs.
        self.batch = batch or min(concurrency, 500)
        self.owner = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.stats = WorkerStats()
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="herald")
        self._info = ""
        self._pool: AsyncConnectionPool[AsyncConn] | None = None
        # Claims, heartbeats, completions and maintenance use connections of their own,
        # so handlers holding every pooled connection can never starve a lease renewal.
        self._control: AsyncConnectionPool[AsyncConn] | None = None
        self._claims: AsyncConnectionPool[AsyncConn] | None = None
        # Held while a lease-changing statement of ours is in flight (heartbeat, finish),
        # so a heartbeat never mistakes a job we just finished for a lost lease.
        self.lease_lock = asyncio.Lock()
        self._maintenance_enabled = maintenance
        self._running: dict[int, _Running] = {}
        self._unflushed: dict[int, int] = {}  # job id -> fence, finished but not yet recorded
        self._outbox: list[_Outcome] = []
        self._wake = asyncio.Event()
        self._capacity = asyncio.Event()
        self._flush = asyncio.Event()
        self._flushed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._hard_stop = asyncio.Event()
        self._last_lease_confirmed = time.monotonic()
        self.ready = asyncio.Event()
        # Each is called as observer(kind, outcome, seconds) after a handler run (metrics).
        self.observers: list[Callable[[str, str, float], None]] = []

    @property
    def control(self) -> AsyncConnectionPool[AsyncConn]:
        if self._control is None:
            raise RuntimeError("the worker is not running")
        return self._control

    @property
    def claims(self) -> AsyncConnectionPool[AsyncConn]:
        if self._claims is None:
            raise RuntimeError("the worker is not running")
        return self._claims

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConn]:
        if self._pool is None:
            raise RuntimeError("the worker is not running")
        return self._pool

    # --- lifecycle ---------------------------------------------------------------------

    def stop(self) -> None:
        """First call: stop claiming and drain. Second call: cancel handlers at once."""
        if self._stopping.is_set():
            self._hard_stop.set()
        self._stopping.set()
        self._wake.set()
        self._capacity.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)

    async def run(self) -> None:
        """Work until :meth:`stop` is called (and the drain finishes)."""
        url = database_url(self.settings)  # boots (or finds) the embedded server: once
        self._info = conninfo(url, self.settings.schema, "herald-worker")
        await self._require_schema()
        # Handlers' connections are checked on checkout: after a database restart a dead
        # connection would otherwise fail a handler's transaction and cost it an attempt.
        # The control loops below retry their own failures at no cost to any job.
        self._pool = make_pool(
            self._info, self.settings.pool_size, name="herald-worker", check=True
        )
        await self._pool.open(wait=False)
        self._control = make_pool(self._info, 4, name="herald-worker-control")
        await self._control.open(wait=False)
        # Claims get a connection of their own that keeps one generic plan: planning the
        # claim anew for every call cost more than running it (on the path to every
        # job's start). Only the claim: its generic plan is index scans even when built
        # on an empty table, where the completion's would not be.
        claims_info = conninfo(url, self.settings.schema, "herald-worker", generic_plans=True)
        self._claims = make_pool(claims_info, 1, name="herald-worker-claims")
        await self._claims.open(wait=False)
        maintenance = Maintenance(self.app, self.settings, self._control)
        helpers = [
            asyncio.create_task(self._heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self._completer_loop(), name="completer"),
        ]
        if self.settings.notify:
            helpers.append(asyncio.create_task(self._listen_loop(), name="listener"))
        if self._maintenance_enabled:
            helpers.append(asyncio.create_task(maintenance.run(self._stopping), name="maintenance"))
        log.info("worker %s started on queues %s", self.owner, ",".join(self.queues))
        try:
            await self._fetch_loop()
            await self._drain()
            await self._await_outbox(within=5.0)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await self._final_flush()
            await self.pool.close()
            await self.control.close()
            await self.claims.close()
            self.executor.shutdown(wait=False, cancel_futures=True)
            log.info("worker %s stopped", self.owner)

    async def _require_schema(self) -> None:
        """Fail fast, with the fix in the message, on a schema not (fully) migrated: a
        worker started before `herald migrate` would otherwise retry its claim forever.
        An unreachable database is not judged here; the loops wait for it."""
        try:
            conn = await connect(self._info)
        except psycopg.OperationalError:
            return
        try:
            await require_migrated(conn, self.settings.schema)
        finally:
            await conn.close()

    async def _drain(self) -> None:
        if not self._running:
            return
        log.info(
            "draining %d running jobs (grace %.1fs)",
            len(self._running),
            self.settings.shutdown_grace,
        )
        tasks = [r.task for r in self._running.values() if r.task is not None]
        hard: asyncio.Future[Any] = asyncio.ensure_future(self._hard_stop.wait())
        everything: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.wait(
            [everything, hard],
            timeout=self.settings.shutdown_grace,
            return_when=asyncio.FIRST_COMPLETED,
        )
        hard.cancel()
        leftover = [
            r.task for r in self._running.values() if r.task is not None and not r.task.done()
        ]
        for task in leftover:
            task.cancel()
        if leftover:
            await asyncio.gather(*leftover, return_exceptions=True)

    async def _await_outbox(self, within: float) -> None:
        """Let the completer record what is left before it is stopped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self._outbox and loop.time() < deadline:
            self._flushed.clear()
            self._flush.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._flushed.wait(), max(0.0, deadline - loop.time()))

    async def _final_flush(self) -> None:
        deadline = time.monotonic() + 5.0
        while self._outbox and time.monotonic() < deadline:
            try:
                await self._flush_once()
            except psycopg.Error:
                await asyncio.sleep(0.2)

    # --- fetching ----------------------------------------------------------------------

    async def _fetch_loop(self) -> None:
        backoff = 0.05
        while not self._stopping.is_set():
            free = self.concurrency - len(self._running)
            if free <= 0:
                self._capacity.clear()
                if self.concurrency - len(self._running) <= 0:
                    await self._capacity.wait()
                continue
            want = min(free, self.batch)
            self._wake.clear()
            try:
                claimed = await self._claim_and_start(want)
                backoff = 0.05
            except Exception as exc:  # the database may be restarting: keep trying
                self.stats.db_errors += 1
                log.warning("claim failed (%s); retrying in %.2fs", exc, backoff)
                await self._sleep_or_stop(backoff)
                backoff = min(backoff * 2, self.settings.poll_interval)
                continue
            self.ready.set()
            if claimed < want:
                await self._wait_for_work()

    async def _claim_and_start(self, limit: int) -> int:
        """Claim up to ``limit`` jobs and start their handlers; returns how many.

        The claim commits (durably) before any handler starts: an attempt is counted
        even if its handler takes the whole process down, so such a job still reaches
        its max_attempts and is dead-lettered instead of crashing workers forever.
        """
        async with self.claims.connection() as conn:
            cur = await conn.execute(
                sql.query("claim"),
                {
                    "queues": self.queues,
                    "kinds": [kind.name for kind in self.app.kinds()],
                    "limit": limit,
                    "owner": self.owner,
                    "lease_s": self.settings.lease,
                },
            )
            rows = await cur.fetchall()
        self.stats.claimed += len(rows)
        for row in rows:
            self._start(row)
        return len(rows)

    async def _wait_for_work(self) -> None:
        """Until woken (a notification, free capacity, stop) or the poll is due.

        The poll timer sets the same event rather than wrapping the wait in
        ``asyncio.wait_for``: a notification then resumes this loop directly, without
        the extra task and the scheduling rounds that wrapper costs.
        """
        timer = asyncio.get_running_loop().call_later(self.settings.poll_interval, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()

    async def _sleep_or_stop(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _listen_loop(self) -> None:
        backoff = 0.1
        while True:
            try:
                conn = await connect(self._info)
                async with conn:
                    await conn.execute(
                        sql.query_with_identifiers("listen", channel=self.settings.channel)
                    )
                    backoff = 0.1
                    self._wake.set()  # anything sent while we were deaf: poll now
                    async for note in conn.notifies():
                        if not note.payload or note.payload in self.queues:
                            self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never give up listening; polling covers the gap
                log.info("listener lost its connection (%s); reconnecting", exc)
                self._wake.set()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    # --- running -----------------------------------------------------------------------

    def _start(self, row: dict[str, Any]) -> None:
        ctx = JobContext(self, row)
        entry = _Running(ctx)
        self._running[ctx.job_id] = entry
        entry.task = asyncio.create_task(self._execute(ctx, row["payload"]))

    async def _execute(self, ctx: JobContext, payload: dict[str, Any]) -> None:
        outcome: _Outcome | None
        started = time.monotonic()
        try:
            kind = self.app.kind(ctx.kind)
            if kind.timeout is None:
                result = await self._run_steps(kind, ctx, payload)
            else:
                async with asyncio.timeout(kind.timeout):
                    result = await self._run_steps(kind, ctx, payload)
            if ctx.completed_in_transaction:
                outcome = None
                self.stats.succeeded += 1
            else:
                outcome = _Outcome(ctx.job_id, ctx.fence, "succeeded", result=dump_result(result))
        except asyncio.CancelledError:
            outcome = self._interrupted(ctx)
        except LeaseLost:
            outcome = None
            self.stats.lease_lost += 1
        except Snooze as exc:
            outcome = _Outcome(ctx.job_id, ctx.fence, "snooze", delay=exc.seconds)
        except Permanent as exc:
            log.warning("job %d (%s) failed permanently: %s", ctx.job_id, ctx.kind, exc)
            outcome = _Outcome(ctx.job_id, ctx.fence, "dead", error=_error("permanent", exc))
        except Cancel as exc:
            outcome = _Outcome(ctx.job_id, ctx.fence, "cancelled", error=_error("cancelled", exc))
        except Retry as exc:
            delay = exc.delay if exc.delay is not None else self._backoff(ctx)
            outcome = _Outcome(
                ctx.job_id, ctx.fence, "retry", delay=delay, error=_error("retry", exc)
            )
        except TimeoutError as exc:
            outcome = _Outcome(
                ctx.job_id,
                ctx.fence,
                "retry",
                delay=self._backoff(ctx),
                error=_error("timeout", exc, "handler timed out"),
            )
        except Exception as exc:  # any unexpected exception is a retryable failure
            # The traceback goes to the log only: the API shows type and message.
            log.warning("job %d (%s) failed: %r", ctx.job_id, ctx.kind, exc, exc_info=exc)
            outcome = _Outcome(
                ctx.job_id,
                ctx.fence,
                "retry",
                delay=self._backoff(ctx),
                error=_error("exception", exc),
            )
        self._running.pop(ctx.job_id, None)
        if outcome is not None and not ctx.lost.is_set():
            self._unflushed[ctx.job_id] = ctx.fence
            self._outbox.append(outcome)
            self._flush.set()
        elif ctx.lost.is_set() and outcome is not None:
            self.stats.lease_lost += 1
        self._capacity.set()
        done = "succeeded" if ctx.completed_in_transaction else "lost"
        ended = outcome.outcome if outcome else done
        for observe in self.observers:
            observe(ctx.kind, ended, time.monotonic() - started)

    def _interrupted(self, ctx: JobContext) -> _Outcome | None:
        if ctx.lost.is_set():
            self.stats.lease_lost += 1
            return None
        # Cancelled by shutdown: hand the job back now rather than wait for the rescuer.
        return _Outcome(
            ctx.job_id, ctx.fence, "retry", delay=0.0, error=json.dumps(_SHUTDOWN_ERROR)
        )

    def _backoff(self, ctx: JobContext) -> float:
        try:
            return self.app.kind(ctx.kind).backoff.delay(ctx.attempt)
        except Exception:
            return 1.0

    async def _run_steps(self, kind: Kind, ctx: JobContext, payload: dict[str, Any]) -> Any:
        for gate in kind.gates.values():  # may raise Snooze: not an attempt
            await gate(self.pool, ctx, payload)
        if not kind.pipeline:
            step = kind.steps[0]
            return await call(step.handler, step.is_async, ctx, payload)
        start = kind.first_step_index(ctx.step)
        result: Any = None
        for index in range(start, len(kind.steps)):
            step = kind.steps[index]
            ctx.step = step.name
            result = await call(step.handler, step.is_async, ctx, payload)
            update = result if isinstance(result, dict) else {}
            if index + 1 < len(kind.steps):
                # Progress is durable before the next step starts: a retry resumes there.
                await ctx.save_checkpoint(update, step=kind.steps[index + 1].name)
            else:
                ctx.checkpoint = {**ctx.checkpoint, **update}
        return result

    # --- leases ------------------------------------------------------------------------

    def _held(self) -> tuple[list[int], list[int]]:
        ids: list[int] = []
        fences: list[int] = []
        for job_id, entry in self._running.items():
            if entry.ctx.completed_in_transaction or entry.ctx.finishing:
                continue
            ids.append(job_id)
            fences.append(entry.ctx.fence)
        for job_id, fence in self._unflushed.items():
            if job_id not in self._running:
                ids.append(job_id)
                fences.append(fence)
        return ids, fences

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self._heartbeat_once()
            except Exception:  # a dead heartbeat loop would silently expire every lease
                log.exception("heartbeat pass failed; continuing")

    async def _heartbeat_once(self) -> None:
        sent_at = time.monotonic()
        try:
            if not self._held()[0]:
                self._last_lease_confirmed = sent_at
                return
            # Connection first, then the lock, as everywhere: JobContext.transaction holds
            # a connection while it waits for the lock.
            async with self.control.connection() as conn, self.lease_lock:
                ids, fences = self._held()
                if not ids:
                    self._last_lease_confirmed = sent_at
                    return
                cur = await conn.execute(
                    sql.query("heartbeat"),
                    {
                        "ids": ids,
                        "fences": fences,
                        "lease_s": self.settings.lease,
                        "owner": self.owner,
                    },
                )
                kept = {row["id"] for row in await cur.fetchall()}
        except (psycopg.Error, OSError) as exc:
            self.stats.db_errors += 1
            # Cannot reach the database: once our last confirmed lease has run out by
            # our own clock, nobody should count on these handlers any more.
            if time.monotonic() - self._last_lease_confirmed > self.settings.lease:
                log.warning("leases unconfirmed for longer than the lease (%s): cancelling", exc)
                for job_id in list(self._running):
                    self._lose(job_id)
            return
        self._last_lease_confirmed = sent_at
        for job_id in ids:
            if job_id not in kept:
                self.stats.stale_writes += 1
                self._lose(job_id)

    def _lose(self, job_id: int) -> None:
        entry = self._running.get(job_id)
        self._unflushed.pop(job_id, None)
        if entry is None:
            return
        log.warning(
            "job %d lost its lease (fence %d): cancelling its handler", job_id, entry.ctx.fence
        )
        entry.ctx.lost.set()
        if entry.task is not None:
            entry.task.cancel()

    async def extend_lease(self, job_id: int, fence: int) -> bool:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                sql.query("heartbeat"),
                {
                    "ids": [job_id],
                    "fences": [fence],
                    "lease_s": self.settings.lease,
                    "owner": self.owner,
                },
            )
            return (await cur.fetchone()) is not None

    async def save_checkpoint(
        self, job_id: int, fence: int, step: str | None, data: dict[str, Any]
    ) -> bool:
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                sql.query("checkpoint"),
                {
                    "id": job_id,
                    "fence": fence,
                    "step": step,
                    "checkpoint": json.dumps(data),
                    "owner": self.owner,
                },
            )
            saved = (await cur.fetchone()) is not None
        if not saved:
            self.stats.stale_writes += 1
        return saved

    async def record_stale_write(self, job_id: int, fence: int, operation: str) -> None:
        self.stats.stale_writes += 1
        async with self.pool.connection() as conn:
            await conn.execute(
                sql.query("record_stale_write"),
                {"id": job_id, "fence": fence, "operation": operation, "owner": self.owner},
            )

    # --- completions -------------------------------------------------------------------

    async def _completer_loop(self) -> None:
        backoff = 0.05
        while True:
            await self._flush.wait()
            self._flush.clear()
            while self._outbox:
                try:
                    await self._flush_once()
                    backoff = 0.05
                except Exception as exc:  # keep every outcome until it is recorded
                    self.stats.db_errors += 1
                    log.warning("recording outcomes failed (%s); retrying in %.2fs", exc, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)

    async def _flush_once(self) -> None:
        batch = self._outbox[:1000]
        # Connection before lock, like the heartbeat (see there).
        async with self.control.connection() as conn, self.lease_lock:
            cur = await conn.execute(
                sql.query("finish"),
                {
                    "ids": [o.job_id for o in batch],
                    "fences": [o.fence for o in batch],
                    "outcomes": [o.outcome for o in batch],
                    "delays": [o.delay for o in batch],
                    "errors": [o.error for o in batch],
                    "results": [o.result for o in batch],
                    "owner": self.owner,
                },
            )
            recorded = {row["id"]: row["state"] for row in await cur.fetchall()}
        del self._outbox[: len(batch)]
        for o in batch:
            if self._unflushed.get(o.job_id) == o.fence:
                del self._unflushed[o.job_id]
            state = recorded.get(o.job_id)
            if state is None:
                self.stats.stale_writes += 1
            elif state == "succeeded":
                self.stats.succeeded += 1
            elif state == "dead":
                self.stats.dead += 1
                # Operators watching a process's log see every job that stops for good.
                reason = json.loads(o.error).get("message") if o.error else o.outcome
                log.warning("job %d is dead (dead letter written): %s", o.job_id, reason)
            elif state == "cancelled":
                self.stats.cancelled += 1
            elif o.outcome == "snooze":
                self.stats.snoozed += 1
            else:
                self.stats.retried += 1
        self._flushed.set()


def _error(kind: str, exc: BaseException, message: str | None = None) -> str:
    text = message or str(exc) or type(exc).__name__
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))
    return storable(
        json.dumps(
            {
                "kind": kind,
                "type": type(exc).__name__,
                "message": text[:2000],
                "traceback": trace[-4000:],
            }
        )
    )


async def run_worker(worker: Worker) -> WorkerStats:
    """Run ``worker`` with SIGTERM/SIGINT wired to graceful (then immediate) stop."""
    worker.install_signal_handlers()
    await worker.run()
    return worker.stats


__all__ = ["AsyncConn", "Worker", "WorkerStats", "run_worker"]
