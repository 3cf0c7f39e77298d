"""The fenced-lease protocol of one worker: the jobs it holds and every statement whose
meaning depends on holding them.

A worker holds a job from its claim until the job's outcome is recorded, or until the
lease is known to be lost. The database refuses every write whose (id, fence) is no longer
current; this object adds what only the worker itself can know:

* **Self-fencing.** Each held job remembers when its lease was last confirmed (the send
  time, by this process's monotonic clock, of the claim or heartbeat the database
  accepted; the database then set the expiry to its own now + lease, which is later).
  A watchdog cancels the handler of any job unconfirmed for ``self_fence_after``
  (R_self = 0.8 x lease) seconds: the lease still has at least lease - R_self to run on
  the server, so no other attempt can have started yet. It needs no answer from anyone,
  so it holds whatever the network does.
* **Deadlines.** Every statement here is abandoned after ``statement_timeout`` (its task
  cancelled, not awaited: on a silent link psycopg's own cancellation takes seconds); the
  next pass takes another connection. Heartbeat passes overlap rather than queue behind a
  stuck one. Server-side ``statement_timeout`` and TCP keepalives (herald.db) end the
  abandoned ones.
* **No false losses.** A heartbeat and a statement recording the same job's outcome are
  never in flight together: the recording marks the job ``finishing`` (later heartbeats
  leave it out) and waits out the heartbeats that already include it. A heartbeat that
  no longer finds a job running therefore means the lease was lost. No lock is held
  across a statement, so a stuck heartbeat delays nothing past its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.config import Settings
from herald.db import AsyncConn
from herald.encoding import dump_result
from herald.errors import LeaseLost
from herald.outcomes import Outcome, finish_params

log = logging.getLogger(__name__)
T = TypeVar("T")
# Heartbeat passes in flight at once: a pass stuck on a dead connection does not stop the
# next one (on another connection) from confirming the leases.
HEARTBEATS_IN_FLIGHT = 2


class StatementDeadline(TimeoutError):
    """A statement of the lease protocol did not answer within its deadline."""


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
    self_fenced: int = 0
    deadlines: int = 0
    loop_blocked: int = 0


@dataclass(eq=False, slots=True)
class HeldJob:
    """One job this worker holds under (id, fence)."""

    job_id: int
    fence: int
    suspect: bool
    confirmed: float  # monotonic send time of the last claim/heartbeat the database took
    is_lost: bool = False  # the lease is known lost (or unconfirmed): see `lost`
    running: bool = True  # its handler has not returned yet
    finishing: bool = False  # a statement recording its outcome is in flight
    completed: bool = False  # its outcome committed with the handler's transaction
    writes: int = 0  # outcome-recording statements begun (see the heartbeat)
    beating: int = 0  # heartbeat statements in flight that include it
    task: asyncio.Task[None] | None = None
    # Made only when a handler asks to wait for the loss: one per job cost as much as a
    # no-op handler's whole bookkeeping.
    _lost_event: asyncio.Event | None = None

    @property
    def lost(self) -> asyncio.Event:
        """Set when the lease is known lost: a handler may wait for it."""
        if self._lost_event is None:
            self._lost_event = asyncio.Event()
            if self.is_lost:
                self._lost_event.set()
        return self._lost_event

    def mark_lost(self) -> None:
        self.is_lost = True
        if self._lost_event is not None:
            self._lost_event.set()


async def bounded(work: Awaitable[T], seconds: float) -> T:
    """``work``'s result, or :class:`StatementDeadline` after ``seconds``.

    On the deadline the work is cancelled but not awaited: on a silent link psycopg's
    cancellation itself waits for the network. Its outcome is discarded.
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_discard)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_discard)
        raise StatementDeadline(f"no answer within {seconds:g}s")
    return task.result()


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:  # a thread without a loop: a synchronous handler's
        return False


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned statement's error is not news


class Lease:
    """The jobs one worker holds, their outbox, and the fenced statements about them."""

    def __init__(self, owner: str, settings: Settings, stats: WorkerStats) -> None:
        self.owner = owner
        self.settings = settings
        self.stats = stats
        self.jobs: dict[int, HeldJob] = {}
        self.outbox: list[Outcome] = []
        self.flush_wanted = asyncio.Event()
        self.flushed = asyncio.Event()
        self._control: AsyncConnectionPool[AsyncConn] | None = None
        self._pool: AsyncConnectionPool[AsyncConn] | None = None
        self._heartbeats: set[asyncio.Task[None]] = set()
        self._beat_ended = asyncio.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(
        self, control: AsyncConnectionPool[AsyncConn], pool: AsyncConnectionPool[AsyncConn]
    ) -> None:
        """``control``: the engine's own connections; ``pool``: the handlers'."""
        self._control = control
        self._pool = pool
        self._loop = asyncio.get_running_loop()

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConn]:
        if self._pool is None:
            raise RuntimeError("the worker is not running")
        return self._pool

    @property
    def control(self) -> AsyncConnectionPool[AsyncConn]:
        if self._control is None:
            raise RuntimeError("the worker is not running")
        return self._control

    # --- holding -----------------------------------------------------------------------

    def hold(self, row: dict[str, Any], confirmed: float) -> HeldJob:
        held = HeldJob(row["id"], row["fence"], bool(row.get("suspect")), confirmed)
        self.jobs[held.job_id] = held
        return held

    def holds_suspect(self) -> bool:
        return any(h.suspect for h in self.jobs.values())

    def handler_done(self, held: HeldJob, outcome: Outcome | None) -> None:
        """The handler returned: queue its outcome, or let the job go."""
        held.running = False
        if outcome is not None and not held.is_lost and not held.completed:
            self.outbox.append(outcome)
            self.flush_wanted.set()
        else:
            self._release(held)

    def _release(self, held: HeldJob) -> None:
        if self.jobs.get(held.job_id) is held:
            del self.jobs[held.job_id]

    def lose(self, held: HeldJob, why: str) -> None:
        """The lease is gone (or cannot be confirmed): cancel the handler, stop renewing."""
        if held.is_lost or held.completed:
            return
        log.warning("job %d: %s (fence %d): cancelling its handler", held.job_id, why, held.fence)
        held.mark_lost()
        if held.task is not None and not held.task.done():
            held.task.cancel()
        if not held.running:
            self._release(held)

    # --- self-fencing ------------------------------------------------------------------

    def fence_unconfirmed(self, now: float | None = None) -> int:
        """Cancel every handler whose lease went unconfirmed for R_self; returns how many."""
        now = time.monotonic() if now is None else now
        limit = self.settings.self_fence_after
        late = [
            h
            for h in self.jobs.values()
            if h.running and not h.is_lost and not h.completed and now - h.confirmed > limit
        ]
        for held in late:
            self._self_fence(
                held, f"lease unconfirmed for {now - held.confirmed:.1f}s (R_self {limit:g}s)"
            )
        return len(late)

    async def watchdog_loop(self) -> None:
        tick = min(0.25, self.settings.self_fence_margin / 4)
        while True:
            await asyncio.sleep(tick)
            self.fence_unconfirmed()

    # --- heartbeats --------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.settings.heartbeat_interval)
                self._heartbeats = {t for t in self._heartbeats if not t.done()}
                if len(self._heartbeats) >= HEARTBEATS_IN_FLIGHT:
                    continue  # both stuck: the watchdog fences if this goes on
                task = asyncio.create_task(self._heartbeat_pass())
                self._heartbeats.add(task)
        finally:
            for task in self._heartbeats:  # not awaited: one may be stuck on a dead link
                task.cancel()

    async def _heartbeat_pass(self) -> None:
        try:
            await self.heartbeat_once()
        except Exception as exc:  # a dead heartbeat loop would silently expire every lease
            self.stats.db_errors += 1
            if isinstance(exc, StatementDeadline):
                self.stats.deadlines += 1
            log.warning("heartbeat failed (%s); the next one will try again", exc)

    def _renewable(self) -> list[tuple[HeldJob, int]]:
        return [
            (h, h.writes)
            for h in self.jobs.values()
            if not h.is_lost and not h.completed and not h.finishing
        ]

    async def heartbeat_once(self) -> None:
        """Extend every held lease in one statement; a job missing from the answer is lost."""
        snapshot = self._renewable()
        if not snapshot:
            return
        sent_at = time.monotonic()
        params = {
            "ids": [h.job_id for h, _ in snapshot],
            "fences": [h.fence for h, _ in snapshot],
            "lease_s": self.settings.lease,
            "owner": self.owner,
        }
        for held, _ in snapshot:
            held.beating += 1
        try:
            kept = {row["id"] for row in await self._control_rows("heartbeat", params)}
        finally:
            for held, _ in snapshot:
                held.beating -= 1
            async with self._beat_ended:
                self._beat_ended.notify_all()
        for held, writes in snapshot:
            if held.job_id in kept:
                held.confirmed = max(held.confirmed, sent_at)
            elif self._still_unrecorded(held, writes):
                self.stats.stale_writes += 1
                self.lose(held, "lost its lease")

    async def _begin_recording(self, helds: list[HeldJob]) -> None:
        """Take these jobs out of the heartbeats, and wait out the heartbeats in flight."""
        for held in helds:
            held.finishing = True
            held.writes += 1
        async with self._beat_ended:
            await self._beat_ended.wait_for(lambda: all(h.beating == 0 for h in helds))

    def _still_unrecorded(self, held: HeldJob, writes: int) -> bool:
        """Held as at the snapshot, with no outcome of ours recorded or in flight since."""
        return (
            self.jobs.get(held.job_id) is held
            and held.writes == writes
            and not held.finishing
            and not held.completed
        )

    async def _control_rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            async with self.control.connection() as conn:
                cur = await conn.execute(sql.query(name), params)
                return await cur.fetchall()

        return await bounded(run(), self.settings.statement_timeout)

    # --- statements a handler makes through its context --------------------------------

    def check(self, held: HeldJob) -> None:
        if held.is_lost:
            raise LeaseLost(f"job {held.job_id} lease lost (fence {held.fence})")

    def vouch(self, held: HeldJob) -> None:
        """Raise :class:`LeaseLost` unless the lease was confirmed within R_self, by this
        process's clock now: checked at the moment of the call, it also holds for a
        process that was frozen (SIGSTOP, a VM pause) and has not yet noticed. Safe to
        call from a synchronous handler's thread."""
        self.check(held)
        unconfirmed = time.monotonic() - held.confirmed
        if unconfirmed <= self.settings.self_fence_after:
            return
        why = f"lease unconfirmed for {unconfirmed:.1f}s at a guarded call"
        if self._loop is None or _on_loop(self._loop):
            self._self_fence(held, why)
        else:
            self._loop.call_soon_threadsafe(self._self_fence, held, why)
        raise LeaseLost(f"job {held.job_id}: {why}")

    def _self_fence(self, held: HeldJob, why: str) -> None:
        if not held.is_lost:
            self.stats.self_fenced += 1
            self.lose(held, why)

    async def _pool_rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            async with self.pool.connection() as conn:
                cur = await conn.execute(sql.query(name), params)
                return await cur.fetchall() if cur.description else []

        return await bounded(run(), self.settings.statement_timeout)

    async def extend(self, held: HeldJob) -> None:
        """Extend this one lease now (raises :class:`LeaseLost` when it is gone)."""
        self.check(held)
        sent_at = time.monotonic()
        params = {
            "ids": [held.job_id],
            "fences": [held.fence],
            "lease_s": self.settings.lease,
            "owner": self.owner,
        }
        if await self._pool_rows("heartbeat", params):
            held.confirmed = max(held.confirmed, sent_at)
            return
        self.stats.stale_writes += 1
        self.lose(held, "lost its lease")
        self.check(held)

    async def save_checkpoint(self, held: HeldJob, step: str | None, data: dict[str, Any]) -> None:
        """Save a pipeline's progress, fenced (raises :class:`LeaseLost` when refused)."""
        self.check(held)
        params = {
            "id": held.job_id,
            "fence": held.fence,
            "step": step,
            "checkpoint": json.dumps(data),
            "owner": self.owner,
        }
        if not await self._pool_rows("checkpoint", params):
            self.stats.stale_writes += 1
            self.lose(held, "lost its lease")
            self.check(held)

    async def record_stale_write(self, held: HeldJob, operation: str) -> None:
        self.stats.stale_writes += 1
        params = {
            "id": held.job_id,
            "fence": held.fence,
            "operation": operation,
            "owner": self.owner,
        }
        await self._pool_rows("record_stale_write", params)

    @asynccontextmanager
    async def transaction(self, held: HeldJob, result: Any = None) -> AsyncIterator[AsyncConn]:
        """A transaction of the handler's that commits together with the job's success.

        If the lease was lost meanwhile, the fenced completion is refused, everything
        rolls back and :class:`LeaseLost` is raised: the effect is recorded exactly once.
        """
        self.check(held)
        try:
            async with self.pool.connection() as conn:
                try:
                    async with conn.transaction():
                        yield conn
                        # From here a heartbeat leaves the job alone (see the module doc).
                        await self._begin_recording([held])
                        cur = conn.cursor(row_factory=dict_row)
                        await cur.execute(
                            sql.query("finish"),
                            finish_params(
                                [
                                    Outcome(
                                        held.job_id,
                                        held.fence,
                                        "succeeded",
                                        result=dump_result(result),
                                    )
                                ],
                                self.owner,
                            ),
                        )
                        if await cur.fetchone() is None:
                            raise _FenceRefused
                    held.completed = True  # committed: never heartbeat this job again
                finally:
                    held.finishing = False
        except _FenceRefused:
            # The refusal was rolled back with the effect: count it on its own.
            held.mark_lost()
            await self.record_stale_write(held, "transaction")
            raise LeaseLost(
                f"job {held.job_id} lost its lease before its transaction committed"
            ) from None

    # --- recording outcomes ------------------------------------------------------------

    async def completer_loop(self) -> None:
        backoff = 0.05
        while True:
            await self.flush_wanted.wait()
            self.flush_wanted.clear()
            while self.outbox:
                try:
                    await self.flush_once()
                    backoff = 0.05
                except Exception as exc:  # keep every outcome until it is recorded
                    self.stats.db_errors += 1
                    log.warning("recording outcomes failed (%s); retrying in %.2fs", exc, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)

    async def flush_once(self) -> None:
        """Record up to 1000 queued outcomes with one fenced statement."""
        batch = self.outbox[:1000]
        helds = [self.jobs.get(o.job_id) for o in batch]
        mine = [
            h for h, o in zip(helds, batch, strict=True) if h is not None and h.fence == o.fence
        ]
        try:
            await self._begin_recording(mine)
            rows = await self._control_rows("finish", finish_params(batch, self.owner))
        finally:
            for held in mine:
                held.finishing = False
        recorded = {row["id"]: row["state"] for row in rows}
        del self.outbox[: len(batch)]
        for held in mine:
            self._release(held)
        for o in batch:
            self._count(o, recorded.get(o.job_id))
        self.flushed.set()

    def _count(self, o: Outcome, state: str | None) -> None:
        stats = self.stats
        if state is None:
            stats.stale_writes += 1
        elif state == "succeeded":
            stats.succeeded += 1
        elif state == "dead":
            stats.dead += 1
            # Operators watching a process's log see every job that stops for good.
            reason = json.loads(o.error).get("message") if o.error else o.outcome
            log.warning("job %d is dead (dead letter written): %s", o.job_id, reason)
        elif state == "cancelled":
            stats.cancelled += 1
        elif o.outcome == "snooze":
            stats.snoozed += 1
        else:
            stats.retried += 1

    async def await_outbox(self, within: float) -> None:
        """Let the completer record what is left, for at most ``within`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self.outbox and loop.time() < deadline:
            self.flushed.clear()
            self.flush_wanted.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flushed.wait(), max(0.0, deadline - loop.time()))

    async def final_flush(self, within: float) -> None:
        """After the completer stopped: a last try at the outbox, for ``within`` seconds."""
        deadline = time.monotonic() + within
        while self.outbox and time.monotonic() < deadline:
            try:
                await bounded(self.flush_once(), max(0.1, deadline - time.monotonic()))
            except Exception:
                await asyncio.sleep(0.2)


class _FenceRefused(Exception):
    """Internal: roll the handler's transaction back, its completion was refused."""
