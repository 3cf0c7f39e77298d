"""The cleanup runner: compensation for failed attempts, retried until it succeeds.

Every dead letter starts with cleanup ``pending``. The runner, a low-frequency loop safe
to run on several nodes at once, works through that failure log:

* kinds without a compensation hook -> ``not_needed``;
* otherwise it claims due records (``SKIP LOCKED``), calls the kind's hook with the dead
  letter (its ``cleanup`` field is the failed attempt's checkpoint: what it produced),
  and records ``done`` - or the error, then tries again after a capped exponential
  backoff. It never gives up: a record stays ``pending`` with its attempts and last
  error on show until its hook succeeds, so hooks must be idempotent.

Only dead letters are cleaned up, so a job that succeeded never is. Dead letters of
kinds this application does not register are left for a runner that knows them.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.backoff import Backoff
from herald.config import Settings
from herald.db import AsyncConn, Row, conninfo, database_url, make_pool
from herald.ops.conn import Source, connection
from herald.periodic import run_periodically
from herald.registry import Herald, Kind
from herald.rows import all_rows, one_row

log = logging.getLogger(__name__)

# Slow on purpose: a downstream that is down is not helped by being asked every second.
DEFAULT_BACKOFF = Backoff(base=10.0, factor=2.0, cap=3600.0, jitter=0.2)


@dataclass
class CleanupStats:
    done: int = 0
    failed: int = 0
    not_needed: int = 0
    superseded: int = 0  # outcomes of claims that had expired, ignored
    errors: int = 0  # database errors of the runner itself


@dataclass(frozen=True)
class Backlog:
    pending: int
    failing: int  # pending records whose hook has failed at least once
    oldest_pending_s: float | None


class CleanupRunner:
    """Calls compensation hooks for dead letters; see the module docstring.

    ``lease`` is how long a claimed record is left alone by other runners (and the
    hook's time limit); ``backoff`` spaces the retries of a failing hook.
    """

    def __init__(
        self,
        app: Herald,
        source: Source,
        *,
        interval: float = 30.0,
        batch: int = 20,
        lease: float = 300.0,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> None:
        if interval <= 0 or lease <= 0 or batch < 1:
            raise ValueError("interval and lease must be positive, batch at least 1")
        self.app = app
        self.source = source
        self.interval = interval
        self.batch = batch
        self.lease = lease
        self.backoff = backoff
        self.stats = CleanupStats()
        self._own_pool: AsyncConnectionPool[AsyncConn] | None = None

    @classmethod
    async def open(cls, app: Herald, settings: Settings, **options: Any) -> CleanupRunner:
        """A runner with a small pool of its own (close it with :meth:`close`)."""
        info = conninfo(
            database_url(settings), settings.schema, "herald-cleanup", settings=settings
        )
        pool = make_pool(info, 2, name="herald-cleanup", pooled=settings.pooled)
        await pool.open(wait=True)
        runner = cls(app, pool, **options)
        runner._own_pool = pool
        return runner

    async def close(self) -> None:
        if self._own_pool is not None:
            await self._own_pool.close()

    def _kinds(self) -> tuple[dict[str, Kind], list[str]]:
        hooked = {k.name: k for k in self.app.kinds() if k.compensate is not None}
        plain = [k.name for k in self.app.kinds() if k.compensate is None]
        return hooked, plain

    async def run_once(self) -> int:
        """Settle hook-less records and run one batch of due hooks; returns records handled."""
        hooked, plain = self._kinds()
        handled = 0
        async with connection(self.source) as conn:
            if plain:
                cur = await conn.execute(
                    sql.query("ops_cleanup_not_needed"), {"kinds": plain, "limit": 1000}
                )
                settled = len(await cur.fetchall())
                self.stats.not_needed += settled
                handled += settled
            if not hooked:
                return handled
            claimed = await all_rows(
                conn,
                "ops_cleanup_claim",
                {"kinds": list(hooked), "limit": self.batch, "lease_s": self.lease},
            )
        # Hooks run with no connection held: they may be slow.
        outcomes = await asyncio.gather(*(self._compensate(hooked[r["kind"]], r) for r in claimed))
        async with connection(self.source) as conn:
            for row, error in zip(claimed, outcomes, strict=True):
                await self._record(conn, row, error)
        return handled + len(claimed)

    async def _compensate(self, kind: Kind, row: Row) -> str | None:
        """Call the hook; None on success, else the error text."""
        hook = kind.compensate
        assert hook is not None
        try:
            async with asyncio.timeout(self.lease):
                if inspect.iscoroutinefunction(hook):
                    await hook(dict(row))
                else:
                    result = await asyncio.to_thread(hook, dict(row))
                    if inspect.isawaitable(result):
                        await result
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return text[:2000]
        return None

    async def _record(self, conn: AsyncConn, row: Row, error: str | None) -> None:
        params: dict[str, Any] = {"id": row["id"], "attempts": row["cleanup_attempts"]}
        delay = 0.0
        if error is None:
            cur = await conn.execute(sql.query("ops_cleanup_done"), params)
        else:
            delay = self.backoff.delay(row["cleanup_attempts"])
            cur = await conn.execute(
                sql.query("ops_cleanup_failed"), {**params, "error": error, "delay_s": delay}
            )
        if await cur.fetchone() is None:
            # Our claim expired and another runner took the record over: its word counts.
            self.stats.superseded += 1
            log.info("cleanup outcome of dead letter %d superseded by a newer claim", row["id"])
        elif error is None:
            self.stats.done += 1
            log.info("cleanup of dead letter %d (job %d) done", row["id"], row["job_id"])
        else:
            self.stats.failed += 1
            log.warning(
                "cleanup of dead letter %d (job %d) failed on attempt %d (%s); again in %.1fs",
                row["id"],
                row["job_id"],
                row["cleanup_attempts"],
                error,
                delay,
            )

    async def run(self, stopping: asyncio.Event) -> None:
        """Run a pass every ``interval`` seconds (sooner while full batches come back)."""

        async def one_pass() -> None:
            while await self.run_once() >= self.batch and not stopping.is_set():
                pass

        def count(_: Exception) -> None:
            self.stats.errors += 1

        await run_periodically(
            one_pass,
            every=self.interval,
            stopping=stopping,
            what="cleanup pass",
            log=log,
            errors=(psycopg.Error, OSError),
            on_error=count,
        )


async def backlog(conn: Source) -> Backlog:
    """How many cleanups are pending, how many of them are failing, and the oldest's age."""
    async with connection(conn) as c:
        row = await one_row(c, "ops_cleanup_backlog")
    return Backlog(int(row["pending"]), int(row["failing"]), row["oldest_pending_s"])
