"""The worker: claims batches, runs handlers under leases, records outcomes in batches.

Moving parts, each a small loop on one asyncio event loop:

* fetcher   - claims up to the free capacity with one SKIP LOCKED statement; wakes on
              NOTIFY (a hint) and on its poll timer (the guarantee). While handlers are
              short it also claims ahead: up to ``prefetch`` jobs leased, not yet started
              (by default the concurrency, at least 200 and at most 500), each started
              the moment a slot frees (a graceful stop runs them too);
* listener  - holds LISTEN on its own connection and reconnects forever; a reconnect
              triggers a poll, since notifications sent meanwhile are gone;
* the lease protocol (heartbeats, self-fencing watchdog, batched fenced completions) -
              see :mod:`herald.lease`; one attempt's run - see :mod:`herald.attempt`;
* maintenance (rescuer, pruner) - see :mod:`herald.maintenance`.

Handlers run outside any database transaction. Database time decides every lease; the
worker's own monotonic clock decides when it stops trusting its leases (self-fencing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from herald import sql, tenancy
from herald.attempt import Deadlines, run_attempt
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn, connect, conninfo, database_url, fast_json, make_pool
from herald.lease import HeldJob, Lease, StatementDeadline, WorkerStats, bounded
from herald.loopwatch import LoopWatch
from herald.maintenance import Maintenance
from herald.migrate import require_migrated
from herald.outcomes import SHUTDOWN_ERROR, Outcome
from herald.registry import Herald

log = logging.getLogger(__name__)
# Handlers shorter than this on average (seconds) make the worker claim ahead.
PREFETCH_BELOW = 0.005
# Jobs claimed ahead by default: at least this many, whatever the concurrency. A claim's
# round trip and durable commit are shared by the jobs it brings: claiming 16 ahead at
# concurrency 16 left its handlers waiting on claims, at twice the CPU per job.
PREFETCH_MIN = 200


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
        prefetch: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        self.app = app
        self.settings = settings or Settings.from_env()
        self.queues = list(queues or app.queues() or ["default"])
        self.concurrency = concurrency
        # Claims are batched up to the free capacity: big batches amortise each statement's
        # commit, which is what bounds the throughput of short jobs.
        self.batch = batch or min(concurrency, 500)
        # Claimed ahead: the next claim is in flight while handlers run, not between
        # batches. Only while handlers are short (a job waits here for a slot, leased).
        default = min(max(concurrency, PREFETCH_MIN), 500)
        self.prefetch = default if prefetch is None else prefetch
        self._ahead: deque[tuple[dict[str, Any], HeldJob]] = deque()
        self._typical = PREFETCH_BELOW  # seconds a handler takes (moving average)
        self.owner = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.stats = WorkerStats()
        self.lease = Lease(self.owner, self.settings, self.stats)
        self.loopwatch = LoopWatch(self.stats, threshold=self.settings.lease / 4)
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="herald")
        self._info = ""
        self._pool: AsyncConnectionPool[AsyncConn] | None = None
        # Claims, heartbeats, completions and maintenance use connections of their own,
        # so handlers holding every pooled connection can never starve a lease renewal.
        self._control: AsyncConnectionPool[AsyncConn] | None = None
        self._claims: AsyncConnectionPool[AsyncConn] | None = None
        self._maintenance_enabled = maintenance
        self._running: dict[int, asyncio.Task[None]] = {}
        self._deadlines = Deadlines()
        self._wake = asyncio.Event()
        self._capacity = asyncio.Event()
        self._stopping = asyncio.Event()
        self._hard_stop = asyncio.Event()
        self._stop_requested: float | None = None  # monotonic time of the first stop()
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
        if self._stop_requested is None:
            self._stop_requested = time.monotonic()
        self._stopping.set()
        self._wake.set()
        self._capacity.set()

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)

    @property
    def _tail(self) -> float:
        """The part of the shutdown grace kept for recording outcomes and closing."""
        return min(5.0, self.settings.shutdown_grace / 4)

    def _grace_left(self) -> float:
        begun = self._stop_requested or time.monotonic()
        return max(0.0, self.settings.shutdown_grace - (time.monotonic() - begun))

    async def run(self) -> None:
        """Work until :meth:`stop` is called (and the drain finishes).

        The engine's own loops (claim, leases, outcomes, maintenance) act for the
        platform, across tenants; each handler runs under its job's tenant."""
        with tenancy.platform():
            await self._run()

    async def _run(self) -> None:
        url = database_url(self.settings)  # boots (or finds) the embedded server: once
        s = self.settings
        self._info = conninfo(url, s.schema, "herald-worker", settings=s)
        await self._require_schema()
        engine_info = conninfo(url, s.schema, "herald-worker", settings=s, engine=True)
        # Handlers' connections are checked on checkout: after a database restart a dead
        # connection would otherwise fail a handler's transaction and cost it an attempt.
        # The control loops below retry their own failures at no cost to any job.
        self._pool = make_pool(
            self._info, s.pool_size, name="herald-worker", check=True, pooled=s.pooled
        )
        await self._pool.open(wait=False)
        self._control = make_pool(engine_info, 5, name="herald-worker-control", pooled=s.pooled)
        await self._control.open(wait=False)
        # Claims get a connection of their own that keeps one generic plan: planning the
        # claim anew for every call cost more than running it (on the path to every
        # job's start). Only the claim: its generic plan is index scans even when built
        # on an empty table, where the completion's would not be.
        claims_info = conninfo(
            url, s.schema, "herald-worker", generic_plans=True, settings=s, engine=True
        )
        self._claims = make_pool(
            claims_info, 1, name="herald-worker-claims", pooled=s.pooled, configure=fast_json
        )
        await self._claims.open(wait=False)
        self.lease.open(self._control, self._pool)
        maintenance = Maintenance(self.app, s, self._control)
        helpers = [
            asyncio.create_task(self.lease.heartbeat_loop(), name="heartbeat"),
            asyncio.create_task(self.lease.watchdog_loop(), name="self-fence"),
            asyncio.create_task(self.lease.completer_loop(), name="completer"),
            asyncio.create_task(self.loopwatch.run(), name="loopwatch"),
        ]
        # Through a pooler LISTEN needs a direct connection (listen_url); without one, polling.
        if s.notify and (not s.pooled or s.listen_url):
            helpers.append(asyncio.create_task(self._listen_loop(), name="listener"))
        if self._maintenance_enabled:
            helpers.append(asyncio.create_task(maintenance.run(self._stopping), name="maintenance"))
        log.info("worker %s started on queues %s", self.owner, ",".join(self.queues))
        try:
            await self._fetch_loop()
            await self._drain()
            await self.lease.await_outbox(within=max(0.1, self._grace_left() - self._tail / 2))
        finally:
            if self._stop_requested is None:  # stopped by an error: the same bound applies
                self._stop_requested = time.monotonic()
            for task in helpers:
                task.cancel()
            # Not awaited past a moment: a task cancelled on a silent link may take seconds.
            await asyncio.wait(helpers, timeout=min(0.5, self._grace_left() / 4 + 0.01))
            await self.lease.final_flush(within=min(self._tail / 2, self._grace_left() / 2))
            closing = [p.close(timeout=0.2) for p in (self._pool, self._control, self._claims)]
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*closing), self._grace_left() + 0.01)
            self.executor.shutdown(wait=False, cancel_futures=True)
            log.info("worker %s stopped", self.owner)

    async def _require_schema(self) -> None:
        """Fail fast, with the fix in the message, on a schema not (fully) migrated: a
        worker started before `herald migrate` would otherwise retry its claim forever.
        An unreachable database is not judged here; the loops wait for it."""
        try:
            conn = await connect(self._info, pooled=self.settings.pooled)
        except psycopg.OperationalError:
            return
        try:
            await require_migrated(conn, self.settings.schema)
        finally:
            await conn.close()

    async def _drain(self) -> None:
        """Let the running handlers end within the grace, and the jobs claimed ahead run
        as their slots free (each claim already counted an attempt); then cancel."""
        if not self._running and not self._ahead:
            return
        grace = max(0.0, self._grace_left() - self._tail)
        log.info(
            "draining %d running jobs and %d claimed ahead (grace %.1fs)",
            len(self._running),
            len(self._ahead),
            grace,
        )
        hard: asyncio.Future[Any] = asyncio.ensure_future(self._hard_stop.wait())
        while not hard.done():
            self._start_ahead()
            pending = [t for t in self._running.values() if not t.done()]
            left = max(0.0, self._grace_left() - self._tail)
            if not pending or left <= 0:
                break
            await asyncio.wait([*pending, hard], timeout=left, return_when=asyncio.FIRST_COMPLETED)
        hard.cancel()
        self._abandon_ahead()
        leftover = [t for t in self._running.values() if not t.done()]
        for task in leftover:
            task.cancel()
        if leftover:  # a handler that ignores cancellation is not waited for past the tail
            await asyncio.wait(leftover, timeout=max(0.1, self._tail / 2))

    # --- fetching ----------------------------------------------------------------------

    async def _control_ready(self) -> None:
        """Claim nothing before a heartbeat can get a connection: a claim confirms a lease
        that only a heartbeat can keep, and a slow first connection would self-fence it."""
        async with self.control.connection():
            pass

    async def _fetch_loop(self) -> None:
        backoff = 0.05
        ready = False
        while not self._stopping.is_set():
            if not ready:
                try:
                    await bounded(self._control_ready(), self.settings.statement_timeout)
                    ready = True
                except Exception as exc:
                    log.warning("no database connection yet (%s); retrying", exc)
                    await self._sleep_or_stop(backoff)
                    backoff = min(backoff * 2, self.settings.poll_interval)
                    continue
            free = self.concurrency - len(self._running)
            # Claiming ahead only while handlers are short: a long one's slot would keep
            # the jobs claimed ahead from other workers for its whole run.
            ahead = self.prefetch - len(self._ahead) if self._typical < PREFETCH_BELOW else 0
            if free <= 0 and ahead <= 0:
                self._capacity.clear()
                if self.concurrency - len(self._running) <= 0:
                    await self._capacity.wait()
                continue
            want = min(max(free, 0), self.batch) + max(ahead, 0)
            self._wake.clear()
            try:
                claimed = await self._claim_and_start(want)
                backoff = 0.05
            except Exception as exc:  # the database may be restarting: keep trying
                self.stats.db_errors += 1
                if isinstance(exc, StatementDeadline):
                    self.stats.deadlines += 1
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
        free = self.concurrency - len(self._running)
        params = {
            "queues": self.queues,
            "kinds": [kind.name for kind in self.app.kinds()],
            "limit": limit,
            "owner": self.owner,
            "lease_s": self.settings.lease,
            # Poison isolation: one suspect at a time (see herald.lease, rescue.sql), and
            # only into a free slot, started first: never one claimed ahead.
            "suspects": 0 if free <= 0 or self.lease.holds_suspect() else 1,
        }

        async def claim() -> list[dict[str, Any]]:
            async with self.claims.connection() as conn:
                cur = await conn.execute(sql.query("claim"), params)
                return await cur.fetchall()

        sent_at = time.monotonic()  # the lease runs from the database's later now
        rows = await bounded(claim(), self.settings.statement_timeout)
        self.stats.claimed += len(rows)
        if any(row["suspect"] for row in rows):
            rows.sort(key=lambda row: not row["suspect"])
        for row in rows:
            held = self.lease.hold(row, sent_at)
            if len(self._running) < self.concurrency and not self._ahead:
                self._start(row, held)
            else:  # leased (and heartbeated) now, started when a slot frees
                self._ahead.append((row, held))
        self._start_ahead()
        return len(rows)

    def _start_ahead(self) -> None:
        """Start jobs claimed ahead while slots are free (not after a hard stop)."""
        limit = self.settings.self_fence_after
        while self._ahead and len(self._running) < self.concurrency:
            if self._hard_stop.is_set():
                return
            row, held = self._ahead.popleft()
            if held.is_lost or time.monotonic() - held.confirmed > limit:
                self.lease.handler_done(held, None)  # not ours to start any more
            else:
                self._start(row, held)

    def _abandon_ahead(self) -> None:
        """Out of grace: the jobs claimed ahead and not started go back as a running
        handler cancelled by the shutdown does (their claim counted the attempt)."""
        while self._ahead:
            _, held = self._ahead.popleft()
            back = Outcome(held.job_id, held.fence, "retry", delay=0.0, error=SHUTDOWN_ERROR)
            self.lease.handler_done(held, None if held.is_lost else back)

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
                conn = await connect(self._listen_info())
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

    def _listen_info(self) -> str:
        s = self.settings
        if s.pooled and s.listen_url:
            return conninfo(s.listen_url, s.schema, "herald-worker-listen")
        return self._info

    # --- running -----------------------------------------------------------------------

    def _start(self, row: dict[str, Any], held: HeldJob) -> None:
        ctx = JobContext(self.lease, held, row, self.executor)
        task = asyncio.create_task(self._execute(ctx, held, row["payload"]))
        held.task = task
        self._running[ctx.job_id] = task

    async def _execute(self, ctx: JobContext, held: HeldJob, payload: dict[str, Any]) -> None:
        started = time.monotonic()
        acting = tenancy.enter(ctx.tenant)
        try:
            outcome = await run_attempt(self.app, ctx, payload, self._deadlines)
        finally:
            tenancy.leave(acting)
        self._running.pop(ctx.job_id, None)
        took = time.monotonic() - started
        # Capped: one handler stretched by the machine (a preempted process) does not
        # stop the claiming ahead; a few long ones in a row do.
        self._typical += (min(took, 4 * PREFETCH_BELOW) - self._typical) / 8
        if self._ahead:  # the freed slot goes to a job claimed ahead, at once
            self._start_ahead()
        if ctx.lease_lost:
            self.stats.lease_lost += 1
        elif outcome is None and ctx.completed_in_transaction:
            self.stats.succeeded += 1
        self.lease.handler_done(held, outcome)
        self._capacity.set()
        done = "succeeded" if ctx.completed_in_transaction else "lost"
        ended = outcome.outcome if outcome and not ctx.lease_lost else done
        for observe in self.observers:
            observe(ctx.kind, ended, took)


async def run_worker(worker: Worker) -> WorkerStats:
    """Run ``worker`` with SIGTERM/SIGINT wired to graceful (then immediate) stop.

    The process keeps its shutdown promise whatever the network does: if it is still
    running one second past the grace period after the first signal, it exits at once
    (its jobs are rescued when their leases expire).
    """
    timer: threading.Timer | None = None

    def arm() -> None:
        nonlocal timer
        if timer is None:
            timer = threading.Timer(worker.settings.shutdown_grace + 1.0, _overdue)
            timer.daemon = True
            timer.start()

    def on_signal() -> None:
        worker.stop()
        arm()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    # Left armed once set: what remains after run() (the event loop's own tear-down of
    # abandoned tasks) counts against the same grace.
    await worker.run()
    return worker.stats


def _overdue() -> None:
    log.error("shutdown overran its grace period: exiting now")
    logging.shutdown()
    os._exit(1)


__all__ = ["AsyncConn", "Worker", "WorkerStats", "run_worker"]
