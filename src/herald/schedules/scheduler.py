"""The scheduler loop: fire due schedules, a bounded batch per tick.

One tick is one transaction: take up to ``batch`` due schedules (``SKIP LOCKED``, so
several schedulers share the backlog), claim each slot to fire in ``schedule_fires``
(unique per schedule and slot), enqueue the object's job on the same connection, and
move ``next_due_at`` on. A crash anywhere rolls all of it back; nothing fires twice.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from herald import sql, tenancy
from herald.client import Client, Enqueued, JobSpec, Outcome
from herald.config import Settings
from herald.db import AsyncConn
from herald.errors import HeraldError
from herald.periodic import run_periodically, stop_on_signals
from herald.registry import Herald
from herald.rows import fetch_all
from herald.schedules.recurrence import Misfire, Plan, RecurrenceError, next_after, plan
from herald.schedules.rows import DueSchedule, FireClaim
from herald.schedules.store import ScheduleError, ScheduleSpec, spec_of

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0
DEFAULT_BATCH = 100
FIRE_RETENTION = 30 * 24 * 3600.0  # seconds a fired slot's record is kept
_PRUNE_EVERY = 3600.0
_PRUNE_BATCH = 5000


@dataclass
class TickResult:
    """What one tick did. ``lag`` is how late (seconds) the most overdue slot taken was."""

    taken: int = 0
    fired: int = 0
    in_progress: int = 0  # fires that found the object's job already active
    coalesced: int = 0
    skipped: int = 0
    already_fired: int = 0  # slots another pass had fired (guarded by the fire ledger)
    failed: int = 0
    lag: float = 0.0


@dataclass
class _Pass:
    fired: int = 0
    in_progress: int = 0
    coalesced: int = 0
    skipped: int = 0
    already: int = 0

    def add_to(self, result: TickResult) -> None:
        result.fired += self.fired
        result.in_progress += self.in_progress
        result.coalesced += self.coalesced
        result.skipped += self.skipped
        result.already_fired += self.already


# Errors that belong to one schedule's definition (bad kind, payload, rule), not to the
# database connection: they are recorded on the schedule instead of failing the tick.
_FIRE_ERRORS = (HeraldError, ValueError, psycopg.DataError, psycopg.IntegrityError)

_ADVANCE_COLUMNS = (
    "ids",
    "next_due_ats",
    "last_slots",
    "last_job_ids",
    "last_outcomes",
    "fired",
    "coalesced",
    "skipped",
)


def _check_options(interval: float, batch: int, fire_retention: float) -> None:
    if not interval > 0:
        raise ScheduleError(
            f"scheduler interval must be a positive number of seconds, got {interval}"
        )
    if not isinstance(batch, int) or not 1 <= batch <= 10_000:
        raise ScheduleError(f"scheduler batch must be an integer from 1 to 10000, got {batch}")
    if not fire_retention > 0:
        raise ScheduleError("fire retention must be a positive number of seconds")


def _plan_of(spec: ScheduleSpec, row: DueSchedule) -> Plan:
    """What a due schedule fires now, and when it is due next."""
    return plan(
        spec.recurrence,
        row.next_due_at,
        row.now,
        misfire=Misfire(spec.misfire),
        grace=spec.misfire_grace,
        max_fires=spec.max_catchup,
    )


async def _claim_slots(conn: AsyncConn, wanted: list[tuple[int, datetime, int]]) -> list[FireClaim]:
    """Claim the wanted (schedule, slot) fires; those another tick took are left out."""
    if not wanted:
        return []
    claims = await fetch_all(
        conn,
        "schedule_fire_claim",
        {
            "schedule_ids": [w[0] for w in wanted],
            "slots": [w[1] for w in wanted],
            "coalesced": [w[2] for w in wanted],
        },
        FireClaim,
    )
    return sorted(claims, key=lambda c: (c.schedule_id, c.slot))


async def _advance(
    conn: AsyncConn,
    plans: dict[int, Plan],
    fired: dict[int, list[tuple[datetime, Enqueued]]],
    done: _Pass,
) -> None:
    """Move every schedule to its next due time, recording its fires in ``done``."""
    advance: dict[str, list[Any]] = {name: [] for name in _ADVANCE_COLUMNS}
    for sid, decided in plans.items():
        mine = fired.get(sid, [])
        last_slot, last_job = mine[-1] if mine else (None, None)
        coalesced = decided.coalesced if mine else 0
        for name, value in zip(
            _ADVANCE_COLUMNS,
            (
                sid,
                decided.next_due,
                last_slot,
                last_job.id if last_job else None,
                last_job.outcome.value if last_job else None,
                len(mine),
                coalesced,
                decided.skipped,
            ),
            strict=True,
        ):
            advance[name].append(value)
        done.fired += len(mine)
        done.in_progress += sum(job.outcome is Outcome.IN_PROGRESS for _, job in mine)
        done.coalesced += coalesced
        done.skipped += decided.skipped
    await conn.execute(sql.query("schedule_advance"), advance)


class Scheduler:
    """Fires due schedules through ``client`` (whose application must know their kinds)."""

    def __init__(
        self,
        client: Client,
        *,
        interval: float = DEFAULT_INTERVAL,
        batch: int = DEFAULT_BATCH,
        fire_retention: float = FIRE_RETENTION,
        owns_client: bool = False,
    ) -> None:
        _check_options(interval, batch, fire_retention)
        self.client = client
        self.interval = interval
        self.batch = batch
        self.fire_retention = fire_retention
        self._owns_client = owns_client

    @classmethod
    async def open(cls, app: Herald, settings: Settings, **options: Any) -> Scheduler:
        """A scheduler with its own client (closed by :meth:`close`)."""
        _check_options(
            options.get("interval", DEFAULT_INTERVAL),
            options.get("batch", DEFAULT_BATCH),
            options.get("fire_retention", FIRE_RETENTION),
        )
        client = await Client.open(app, settings)
        return cls(client, owns_client=True, **options)

    async def close(self) -> None:
        if self._owns_client:
            await self.client.close()

    # --- one tick ------------------------------------------------------------------------

    @tenancy.as_platform
    async def tick(self, conn: AsyncConn | None = None) -> TickResult:
        """Fire one bounded batch of due schedules, in one transaction."""
        if conn is not None:
            return await self._tick(conn)
        async with self.client.pool.connection() as own:
            return await self._tick(own)

    async def _tick(self, conn: AsyncConn) -> TickResult:
        result = TickResult()
        async with conn.transaction():
            rows = await fetch_all(conn, "schedule_take_due", {"limit": self.batch}, DueSchedule)
            result.taken = len(rows)
            for row in rows:
                result.lag = max(result.lag, (row.now - row.next_due_at).total_seconds())
            # The due schedules of every tenant are taken at once; each tenant's are fired
            # acting for it (until the end of this transaction), so its jobs are its own.
            by_tenant: dict[str, list[DueSchedule]] = {}
            for row in rows:
                by_tenant.setdefault(row.tenant_id, []).append(row)
            for tenant, mine in by_tenant.items():
                await tenancy.tell_in_transaction(conn, tenant)
                await self._fire_batch(conn, mine, result)
        if result.fired or result.failed or result.skipped:
            log.info(
                "scheduler: %d due, %d fired (%d already in progress), %d coalesced, "
                "%d skipped, %d failed",
                result.taken,
                result.fired,
                result.in_progress,
                result.coalesced,
                result.skipped,
                result.failed,
            )
        return result

    async def _fire_batch(
        self, conn: AsyncConn, rows: list[DueSchedule], result: TickResult
    ) -> None:
        """Fire the whole batch in a few statements; if any schedule cannot fire, fall back
        to one savepoint per schedule so the others still fire and the bad one is recorded."""
        try:
            async with conn.transaction():
                done = await self._fire(conn, rows)
        except _FIRE_ERRORS:
            for row in rows:
                try:
                    async with conn.transaction():
                        done = await self._fire(conn, [row])
                except _FIRE_ERRORS as exc:
                    result.failed += 1
                    await self._record_failure(conn, row, exc)
                else:
                    done.add_to(result)
            return
        done.add_to(result)

    async def _fire(self, conn: AsyncConn, rows: list[DueSchedule]) -> _Pass:
        """Plan, claim slots, enqueue and advance ``rows`` (raises if any cannot fire)."""
        specs = {row.id: spec_of(row) for row in rows}
        plans = {row.id: _plan_of(specs[row.id], row) for row in rows}
        wanted = [(sid, slot, p.coalesced) for sid, p in plans.items() for slot in p.fire]
        claims = await _claim_slots(conn, wanted)
        fired = await self._enqueue_claims(conn, specs, claims)
        done = _Pass(already=len(wanted) - len(claims))
        await _advance(conn, plans, fired, done)
        return done

    async def _enqueue_claims(
        self, conn: AsyncConn, specs: dict[int, ScheduleSpec], claims: list[FireClaim]
    ) -> dict[int, list[tuple[datetime, Enqueued]]]:
        """Enqueue one job per claimed slot and record it; each schedule's fires, in order."""
        jobs = [
            JobSpec(spec.kind, spec.payload, spec.key, priority=spec.priority, queue=spec.queue)
            for spec in (specs[c.schedule_id] for c in claims)
        ]
        enqueued = await self.client.enqueue_many(jobs, conn=conn) if jobs else []
        fired: dict[int, list[tuple[datetime, Enqueued]]] = {}
        for claim, job in zip(claims, enqueued, strict=True):
            fired.setdefault(claim.schedule_id, []).append((claim.slot, job))
        if claims:
            await conn.execute(
                sql.query("schedule_fire_record"),
                {
                    "ids": [c.id for c in claims],
                    "job_ids": [e.id for e in enqueued],
                    "outcomes": [e.outcome.value for e in enqueued],
                },
            )
        return fired

    async def _record_failure(self, conn: AsyncConn, row: DueSchedule, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"[:2000]
        pause = False
        try:
            next_due = next_after(spec_of(row).recurrence, row.now)
        except (RecurrenceError, ValueError):
            next_due, pause = row.next_due_at, True
        log.warning("schedule %d could not fire: %s", row.id, message)
        await conn.execute(
            sql.query("schedule_record_failure"),
            {"id": row.id, "next_due_at": next_due, "last_error": message, "pause": pause},
        )

    # --- housekeeping and the loop --------------------------------------------------------

    @tenancy.as_platform
    async def prune(self) -> int:
        """Delete fire records older than the retention; returns how many went."""
        async with self.client.pool.connection() as conn:
            cur = await conn.execute(
                sql.query("schedule_prune_fires"),
                {"retention_s": self.fire_retention, "limit": _PRUNE_BATCH},
            )
            return cur.rowcount

    async def run(self, stop: asyncio.Event) -> None:
        """Tick every ``interval`` seconds until ``stop`` is set; errors are logged, and
        the next tick tries again (a database restart does not end the loop)."""
        log.info("scheduler started: every %.1fs, batch %d", self.interval, self.batch)
        loop = asyncio.get_running_loop()
        next_prune = loop.time()

        async def one_tick() -> None:
            nonlocal next_prune
            await self.tick()
            if loop.time() >= next_prune:
                await self.prune()
                next_prune = loop.time() + _PRUNE_EVERY

        await run_periodically(
            one_tick,
            every=self.interval,
            stopping=stop,
            what="scheduler tick",
            log=log,
            traceback=True,
        )
        log.info("scheduler stopped")


async def run_scheduler(
    app: Herald,
    settings: Settings,
    *,
    interval: float = DEFAULT_INTERVAL,
    batch: int = DEFAULT_BATCH,
) -> int:
    """Run a scheduler with SIGTERM/SIGINT wired to a clean stop (the CLI's entry)."""
    stop = asyncio.Event()
    with stop_on_signals(stop.set):
        scheduler = await Scheduler.open(app, settings, interval=interval, batch=batch)
        try:
            await scheduler.run(stop)
        finally:
            await scheduler.close()
    return 0
