"""Recovery and housekeeping that every node may run at once (SKIP LOCKED, batches).

* rescuer: running jobs whose lease expired go back to waiting as suspects, or are
  dead-lettered once their attempts are spent. Nothing hangs. An expiry costs an attempt
  only to a job that was already a suspect (see rescue.sql: poison isolation).
* pruner: finished jobs past their kind's retention are deleted in small batches;
  kinds that keep their records forever are left alone. So is limiter state nobody
  needs any more: concurrency slots already free, and token buckets idle for longer
  than the default retention (full again by then).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.config import Settings
from herald.db import AsyncConn
from herald.registry import Herald

log = logging.getLogger(__name__)

RESCUE_BATCH = 500
PRUNE_BATCH = 1000
# Keys whose free slots one pass deletes: each is locked (advisory) to the end of the
# pass's transaction, and locks share a bounded table in PostgreSQL.
SLOT_KEYS_BATCH = 100


@dataclass
class MaintenanceStats:
    rescued: int = 0
    rescued_dead: int = 0
    pruned: int = 0
    pruned_limits: int = 0
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

    async def rescue_once(self) -> int:
        """Rescue one batch of expired leases; returns how many jobs were rescued."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql.query("rescue"), {"limit": RESCUE_BATCH})
            rows = await cur.fetchall()
        for row in rows:
            if row["state"] == "dead":
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

    async def prune_limits_once(self) -> bool:
        """Delete one batch of free concurrency slots and long-idle token buckets.

        Returns whether a batch was full (more may be left). A slot is deleted only
        under its key's takers' lock, so a slot taken meanwhile is never deleted.
        """
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql.query("prune_slot_keys"), {"limit": SLOT_KEYS_BATCH})
            keys = [row["key"] for row in await cur.fetchall()]
            deleted = 0
            if keys:
                async with conn.transaction():
                    cur = await conn.execute(sql.query("prune_slot_lock"), {"keys": keys})
                    locked = [row["key"] for row in await cur.fetchall()]
                    if locked:
                        cur = await conn.execute(sql.query("prune_slot_delete"), {"keys": locked})
                        deleted += max(0, cur.rowcount)
            cur = await conn.execute(
                sql.query("prune_rate_buckets"),
                {"retention_s": self.settings.default_retention, "limit": PRUNE_BATCH},
            )
            buckets = max(0, cur.rowcount)
        self.stats.pruned_limits += deleted + buckets
        return len(keys) == SLOT_KEYS_BATCH or buckets == PRUNE_BATCH

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
            # Bounded: keys whose takers are busy would be found again and again.
            for _ in range(10):
                if (stopping is not None and stopping.is_set()) or not (
                    await self.prune_limits_once()
                ):
                    break
            self._next_prune = loop.time() + self.settings.prune_interval

    async def run(self, stopping: asyncio.Event) -> None:
        """Rescue every rescue interval and prune every prune interval until stopped."""
        while not stopping.is_set():
            try:
                await self.run_pass(stopping)
            except Exception as exc:  # must survive database restarts and surprises
                self.stats.errors += 1
                log.warning("maintenance pass failed (%s); will try again", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.settings.rescue_interval)
