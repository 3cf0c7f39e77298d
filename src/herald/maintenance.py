"""Recovery and housekeeping that every node may run at once (SKIP LOCKED, batches).

* rescuer: running jobs whose lease expired go back to waiting as suspects, or are
  dead-lettered once their attempts are spent. Nothing hangs. An expiry costs an attempt
  only to a job that was already a suspect (see rescue.sql: poison isolation).
* pruner: finished jobs past their kind's retention are deleted in small batches;
  kinds that keep their records forever are left alone. The maintenance hooks of the
  layers above (see herald.hooks) prune their own state in the same pass: e.g. the
  limiter state nobody needs any more (herald.ops.limits).
* vacuum: when the server's autovacuum is off, or has left the jobs table alone for
  minutes while its dead rows pile up, the worker vacuums it (see vacuum_due.sql).
  Without it a steady stream of jobs grows the heap and its indexes without bound.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from herald import sql, tenancy
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo, database_url
from herald.periodic import run_periodically
from herald.registry import Herald
from herald.states import JobState

log = logging.getLogger(__name__)

RESCUE_BATCH = 500
PRUNE_BATCH = 1000
# Batches one pass lets each maintenance hook prune.
HOOK_BATCHES = 10
# The vacuum's bar: dead rows past VACUUM_MIN_DEAD + VACUUM_DEAD_FRACTION x live rows,
# looked at every VACUUM_CHECK_INTERVAL seconds; a running autovacuum is trusted unless
# it left the table alone for VACUUM_LAG seconds.
VACUUM_MIN_DEAD = 10_000
VACUUM_DEAD_FRACTION = 0.2
VACUUM_CHECK_INTERVAL = 10.0
VACUUM_LAG = 300.0


@dataclass
class MaintenanceStats:
    rescued: int = 0
    rescued_dead: int = 0
    pruned: int = 0
    pruned_by_hook: dict[str, int] = field(default_factory=dict)
    vacuums: int = 0
    errors: int = 0


class Maintenance:
    def __init__(
        self, app: Herald, settings: Settings, pool: AsyncConnectionPool[AsyncConn]
    ) -> None:
        self.app = app
        self.settings = settings
        self.pool = pool
        self.stats = MaintenanceStats()
        self._next_prune: float | None = None  # loop time of the next prune

    @tenancy.as_platform
    async def rescue_once(self) -> int:
        """Rescue one batch of expired leases; returns how many jobs were rescued."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql.query("rescue"), {"limit": RESCUE_BATCH})
            rows = await cur.fetchall()
        for row in rows:
            if row["state"] == JobState.DEAD:
                self.stats.rescued_dead += 1
                log.warning("job %d dead-lettered: lease expired with no attempts left", row["id"])
            elif row["charged"]:
                log.info("job %d rescued after its lease expired (attempt charged)", row["id"])
            else:
                log.info("job %d rescued after its lease expired (a suspect now)", row["id"])
        self.stats.rescued += len(rows)
        return len(rows)

    def _retention(self) -> tuple[list[str], list[float]]:
        kinds: list[str] = []
        seconds: list[float] = []
        for kind in self.app.kinds():
            if kind.retention is None:
                continue
            kinds.append(kind.name)
            seconds.append(-1.0 if math.isinf(kind.retention) else kind.retention)
        return kinds, seconds

    @tenancy.as_platform
    async def prune_once(self) -> int:
        """Delete one batch of expired records; returns how many jobs were deleted."""
        kinds, seconds = self._retention()
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                sql.query("prune_jobs"),
                {
                    "kinds": kinds,
                    "retention_s": seconds,
                    "default_s": self.settings.default_retention,
                    "limit": PRUNE_BATCH,
                },
            )
            deleted = cur.rowcount
            await conn.execute(sql.query("prune_idempotency"), {"limit": PRUNE_BATCH})
            await conn.execute(
                sql.query("prune_counters"),
                {"default_s": self.settings.default_retention, "limit": PRUNE_BATCH},
            )
        self.stats.pruned += max(0, deleted)
        return max(0, deleted)

    @tenancy.as_platform
    async def prune_hooks_once(self, stopping: asyncio.Event | None = None) -> None:
        """Let each maintenance hook (see herald.hooks) prune its state, a few batches each.

        Bounded: state whose owners are busy would be found again and again.
        """
        for hook in self.app.maintenance_hooks():
            for _ in range(HOOK_BATCHES):
                if stopping is not None and stopping.is_set():
                    return
                pruned = await hook.prune_once(self.pool, self.settings)
                self.stats.pruned_by_hook[hook.name] = (
                    self.stats.pruned_by_hook.get(hook.name, 0) + pruned.deleted
                )
                if not pruned.more:
                    break

    async def vacuum_once(self, min_dead: int = VACUUM_MIN_DEAD, lag: float = VACUUM_LAG) -> bool:
        """Vacuum the jobs table if it is due (see vacuum_due.sql); True when it ran.

        On a connection of its own, as the login it was given: the pools' connections act
        under the runtime role, which does not own the table and may not vacuum it."""
        s = self.settings
        info = conninfo(database_url(s), s.schema, "herald-vacuum", settings=s)
        async with await connect(info, pooled=s.pooled) as conn:
            cur = await conn.execute(
                sql.query("vacuum_due"),
                {"min_dead": min_dead, "dead_fraction": VACUUM_DEAD_FRACTION, "lag_s": lag},
            )
            row = await cur.fetchone()
            if row is None or not row["due"]:
                return False
            log.info("vacuuming the jobs table (%d dead rows)", row["dead"])
            await conn.execute(sql.query("vacuum_jobs"))
        self.stats.vacuums += 1
        return True

    async def run_pass(self, stopping: asyncio.Event | None = None) -> None:
        """Rescue every expired lease, and prune when the prune interval has come round."""
        loop = asyncio.get_running_loop()
        if self._next_prune is None:
            self._next_prune = loop.time() + min(self.settings.prune_interval, 5.0)
        while await self.rescue_once() == RESCUE_BATCH:
            pass
        if loop.time() >= self._next_prune:
            pruned = PRUNE_BATCH
            while pruned == PRUNE_BATCH:
                pruned = await self.prune_once()
            await self.prune_hooks_once(stopping)
            self._next_prune = loop.time() + self.settings.prune_interval

    async def run(self, stopping: asyncio.Event) -> None:
        """Rescue every rescue interval and prune every prune interval until stopped."""

        async def one_pass() -> None:
            await self.run_pass(stopping)

        async def vacuum_pass() -> None:
            await self.vacuum_once()

        def count(_: Exception) -> None:
            self.stats.errors += 1

        # The vacuum runs beside the rescuer, not in its pass: a long vacuum must not
        # delay the rescue of an expired lease.
        await asyncio.gather(
            run_periodically(
                one_pass,
                every=self.settings.rescue_interval,
                stopping=stopping,
                what="maintenance pass",
                log=log,
                on_error=count,
            ),
            run_periodically(
                vacuum_pass,
                every=VACUUM_CHECK_INTERVAL,
                stopping=stopping,
                what="vacuum",
                log=log,
                on_error=count,
            ),
        )
