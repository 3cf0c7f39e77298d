"""Housekeeping: the periodic duties of a deployment, each run by one process at a time.

The duties:

* ``cleanup:<app>``: compensation of dead letters (:mod:`herald.ops.cleanup`) for the
  kinds of this application (one duty per set of kinds: workers of another application
  clean up their own kinds);
* ``queue-samples``: what each queue holds, every half minute (less often at depth), for
  the console's charts over time (:mod:`herald.ops.queue_samples`);
* ``dead-letter-bounds``: dead letters redacted, kept for a retention and under a cap
  (:mod:`herald.ops.dead_bounds`);
* the application's own duties (:meth:`herald.Herald.duty`), such as the catalog sweeping
  the partial files killed writers left behind.

Every ``herald worker`` and ``herald up`` (and the demo) runs a housekeeper, so every
deployment shape runs every duty somewhere. (Rescue and pruning, the maintenance of
:mod:`herald.maintenance`, stay in every worker: a rescue must not wait for a duty to
change hands, and each of their statements is safe on every node at once.)

Each duty is held under a lease in the ``duties`` table, in database time: the holder
renews it every third of the lease; when the holder dies or hangs, the lease lapses and
another process takes the duty over; a graceful stop hands it over at once. So a duty
runs in one process at a time (a pass already under way when its holder lost the lease
still finishes). Exclusivity is about not doing the work N times over on N workers;
correctness never depends on it: each duty's statements are safe concurrently (SKIP
LOCKED claims, idempotent deletes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import inspect
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from herald import sql, tenancy
from herald.config import Settings
from herald.db import AsyncConn, conninfo, database_url, make_pool
from herald.ops import dead_bounds, queue_samples, tenants
from herald.ops.cleanup import CleanupRunner
from herald.periodic import pause
from herald.registry import Herald
from herald.rows import fetch_all

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Duty:
    name: str
    every: float
    run: Callable[[], Awaitable[None]]
    # A duty works on one tenant's rows at a time: each pass runs it for every tenant,
    # acting for it (its reads see that tenant's rows, its writes are that tenant's).
    # The queue samples are the deployment's: one pass, for the platform.
    per_tenant: bool = True
    # Seconds until the next pass is due, for a duty that keeps its cadence in the database
    # (asked before each pass while held); None: a pass every ``every`` seconds.
    due_in: Callable[[], Awaitable[float]] | None = None


@dataclass
class HousekeepingStats:
    passes: dict[str, int] = field(default_factory=dict)  # duty name -> passes run here
    errors: int = 0


def duty_lease(settings: Settings) -> float:
    """How long a duty stays with a holder that stopped renewing it: a few rescue
    intervals, and at most half a job lease."""
    return min(settings.lease / 2, max(3 * settings.rescue_interval, 1.0))


def cleanup_duty_name(app: Herald) -> str:
    kinds = ",".join(sorted(k.name for k in app.kinds()))
    return "cleanup:" + hashlib.sha256(kinds.encode()).hexdigest()[:16]


async def _call(fn: Callable[[], Any]) -> None:
    if inspect.iscoroutinefunction(fn):
        await fn()
        return
    result = await asyncio.to_thread(fn)
    if inspect.isawaitable(result):
        await result


class Housekeeper:
    """Holds and runs the duties of ``app`` (see the module docstring)."""

    def __init__(
        self,
        app: Herald,
        settings: Settings,
        pool: AsyncConnectionPool[AsyncConn],
        *,
        cleanup_interval: float = 30.0,
        holder: str | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.pool = pool
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease = duty_lease(settings)
        self.cleanup = CleanupRunner(app, pool, interval=cleanup_interval)
        self.stats = HousekeepingStats()
        self.held: frozenset[str] = frozenset()
        self._own_pool = False
        self.dead_bounds = dead_bounds.DeadLetterBounds.from_env()  # refused now if malformed
        self.sampling = queue_samples.Cadence()
        self.duties = [
            _Duty(cleanup_duty_name(app), cleanup_interval, self._cleanup_pass),
            _Duty(
                queue_samples.DUTY,
                queue_samples.SAMPLE_EVERY,
                self._sample_queues,
                per_tenant=False,
                due_in=self._samples_due_in,
            ),
            _Duty(dead_bounds.DUTY, dead_bounds.EVERY, self._bound_dead_letters),
            *(_Duty(d.name, d.every, functools.partial(_call, d.run)) for d in app.duties()),
        ]

    @classmethod
    async def open(cls, app: Herald, settings: Settings, **options: Any) -> Housekeeper:
        """A housekeeper with a small pool of its own (close it with :meth:`close`)."""
        dead_bounds.DeadLetterBounds.from_env()  # malformed bounds: refused before a pool
        info = conninfo(
            database_url(settings), settings.schema, "herald-housekeeping", settings=settings
        )
        pool = make_pool(info, 2, name="herald-housekeeping", pooled=settings.pooled)
        await pool.open(wait=False)
        keeper = cls(app, settings, pool, **options)
        keeper._own_pool = True
        return keeper

    async def close(self) -> None:
        if self._own_pool:
            await self.pool.close()

    async def _bound_dead_letters(self) -> None:
        await dead_bounds.enforce(self.pool, self.dead_bounds)

    async def _sample_queues(self) -> None:
        await self.sampling.sample(self.pool)

    async def _samples_due_in(self) -> float:
        with tenancy.platform():
            return await self.sampling.due_in(self.pool)

    async def _cleanup_pass(self) -> None:
        while await self.cleanup.run_once() >= self.cleanup.batch:
            pass

    async def hold_once(self) -> frozenset[str]:
        """Take or renew this process's duties; the names it holds now."""
        names = [d.name for d in self.duties]
        try:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    sql.query("ops_duty_hold"),
                    {"names": names, "holder": self.holder, "lease_s": self.lease},
                )
                held = frozenset(row["name"] for row in await cur.fetchall())
        except (psycopg.Error, OSError) as exc:
            held = frozenset()  # unsure: hold nothing rather than run beside another
            log.warning("housekeeping could not renew its duties (%s); will try again", exc)
        taken, lost = held - self.held, self.held - held
        if taken:
            log.info("housekeeping %s took over: %s", self.holder, ", ".join(sorted(taken)))
        if lost:
            log.info("housekeeping %s handed over: %s", self.holder, ", ".join(sorted(lost)))
        self.held = held
        return held

    async def release(self) -> None:
        """Hand this process's duties over (on a graceful stop)."""
        if not self.held:
            return
        with contextlib.suppress(psycopg.Error, OSError):
            async with self.pool.connection() as conn:
                await conn.execute(
                    sql.query("ops_duty_release"), {"holder": self.holder, "names": list(self.held)}
                )
        self.held = frozenset()

    async def run_due(self, duty: _Duty) -> bool:
        """One pass of ``duty`` if this process holds it; whether it ran."""
        if duty.name not in self.held:
            return False
        try:
            if not duty.per_tenant:
                with tenancy.platform():
                    await duty.run()
            else:
                for tenant in await tenants.listing(self.pool):
                    with tenancy.acting_as(tenant.id):
                        await duty.run()
        except Exception as exc:  # a duty must survive database restarts and surprises
            self.stats.errors += 1
            log.warning("housekeeping duty %s failed (%s); will try again", duty.name, exc)
        self.stats.passes[duty.name] = self.stats.passes.get(duty.name, 0) + 1
        return True

    async def run(self, stopping: asyncio.Event) -> None:
        """Hold and run the duties until ``stopping`` is set, then hand them over."""
        await self.hold_once()
        holding = asyncio.create_task(self._hold_loop(stopping), name="housekeeping-hold")
        loops = [
            asyncio.create_task(self._duty_loop(d, stopping), name=f"duty-{d.name}")
            for d in self.duties
        ]
        try:
            await asyncio.gather(holding, *loops)
        finally:
            for task in (holding, *loops):
                task.cancel()
            await asyncio.gather(holding, *loops, return_exceptions=True)
            await self.release()

    async def _due_in(self, due_in: Callable[[], Awaitable[float]]) -> float:
        try:
            return await due_in()
        except (psycopg.Error, OSError):
            return 0.0  # the pass itself will fail, be counted and logged, and wait

    async def _hold_loop(self, stopping: asyncio.Event) -> None:
        while not await pause(stopping, self.lease / 3):
            await self.hold_once()

    async def _duty_loop(self, duty: _Duty, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            if duty.due_in is not None and duty.name in self.held:
                wait = await self._due_in(duty.due_in)
                if wait > 0:  # looked at again at least every renewal, in case it moved
                    await pause(stopping, min(wait, self.lease / 3))
                    continue
            ran = await self.run_due(duty)
            # Not holding it: look again at the next renewal, not a whole interval later.
            await pause(stopping, duty.every if ran else min(duty.every, self.lease / 3))


@dataclass(frozen=True)
class DutyLease:
    """Who holds a duty and until when (``ops_duty_list``); ``live``: not yet expired."""

    name: str
    holder: str
    expires_at: datetime
    acquired_at: datetime
    live: bool


async def duties(conn: AsyncConn) -> list[DutyLease]:
    """Who holds which duty, and whether its lease is live (for operators)."""
    return await fetch_all(conn, "ops_duty_list", {}, DutyLease)
