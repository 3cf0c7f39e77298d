"""Ingestion yields to search: a lower CPU priority, and a duty cycle while searches run.

Place in the pipeline: the fetch job's parser and the processing workers share the
machine and the database server with the search read path. On a small host they take
the cores a search needs, and the PostgreSQL backends that serve them (COPY, upserts)
are the larger part. Two measures keep ingestion out of the way:

- :func:`lower_priority` raises the ingestion process's niceness (``HERALD_INGEST_NICE``),
  so the operating system gives the search side of the same host the CPU first. It
  cannot reach the database backends, and it is skipped in a process that also serves
  the search API (``herald up``): it would slow the API with it.
- :class:`Pacer` works between batches: while searches are being served, it sleeps
  after each batch so that ingestion works only ``HERALD_INGEST_DUTY_CYCLE`` of the wall time
  (0.5: a batch that took 80 ms is followed by 80 ms of rest). The pause bounds what
  the ingestion's backends take from the server while searches run, whatever the
  process's priority. With no search running, ingestion goes at full speed.

Whether searches are running is read from PostgreSQL (``pg_stat_activity``: the search
pool's sessions, named ``herald-search``, busy now or within the last second), so every
API process on any host counts, searches of other schemas and databases on the same
server too (they share its CPUs), and nothing is written per search. The answer is
cached for ``probe_every`` seconds. Sessions the ingestion's role may not see count as
busy: without the privilege to tell, ingestion yields.

Pacing only ever delays the next batch: leases, fences, the hold limit of a batch's
transaction and the requeue bounds are unchanged (the pause is taken outside any
transaction, and a fetch's pause is bounded by ``max_pause`` per batch).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from herald import sql
from herald.config import ConfigError
from herald.db import AsyncConn

log = logging.getLogger(__name__)

SEARCH_APPLICATION = "herald-search"  # the application_name of the search pool's sessions

_SERVES_SEARCH = False  # set by the API's search service: never lower this process


@dataclass(frozen=True)
class PacingConfig:
    """How ingestion yields to search (see the module docstring)."""

    duty_cycle: float = (
        0.5  # share of wall time ingestion works while searches run (1: never yield)
    )
    nice: int = 10  # niceness an ingestion process raises itself to (0: unchanged)
    probe_every: float = 0.5  # seconds a "searches are running" answer is reused
    recent: float = 1.0  # a search session active this many seconds ago still counts
    max_pause: float = 2.0  # longest pause after one batch

    def __post_init__(self) -> None:
        if not 0 < self.duty_cycle <= 1:
            raise ConfigError("HERALD_INGEST_DUTY_CYCLE must be above 0 and at most 1")
        if not 0 <= self.nice <= 19:
            raise ConfigError("HERALD_INGEST_NICE must be between 0 and 19")
        if min(self.probe_every, self.recent, self.max_pause) <= 0:
            raise ConfigError("pacing intervals must be positive")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> PacingConfig:
        """``HERALD_INGEST_DUTY_CYCLE`` and ``HERALD_INGEST_NICE`` (unset or empty: defaults)."""
        env = os.environ if environ is None else environ
        duty, nice = env.get("HERALD_INGEST_DUTY_CYCLE") or "", env.get("HERALD_INGEST_NICE") or ""
        try:
            return cls(
                duty_cycle=float(duty) if duty else cls.duty_cycle,
                nice=int(nice) if nice else cls.nice,
            )
        except ValueError:
            raise ConfigError(
                f"HERALD_INGEST_DUTY_CYCLE must be a number and HERALD_INGEST_NICE a whole number, "
                f"got {duty!r} and {nice!r}"
            ) from None


def serves_search() -> None:
    """Mark this process as one that serves searches: its priority is never lowered."""
    global _SERVES_SEARCH
    _SERVES_SEARCH = True


def lower_priority(nice: int) -> int:
    """Raise this process's niceness to at least ``nice``; returns the niceness now.

    Only ever lowers the priority (raising it back needs privileges), and does nothing
    in a process that serves the search API.
    """
    if not hasattr(os, "nice"):
        return 0  # no such call on this platform (Windows): priorities stay as they are
    current = os.nice(0)
    if _SERVES_SEARCH or nice <= current:
        return current
    log.info("ingestion lowers this process's CPU priority to nice %d", nice)
    return os.nice(nice - current)


Probe = Callable[[], Awaitable[bool]]


async def searches_running(
    conn: AsyncConn, recent: float, application: str = SEARCH_APPLICATION
) -> bool:
    """Whether search sessions on the server ran a statement in the last ``recent`` s."""
    cur = await conn.execute(
        sql.query("ingest_search_activity"), {"application": application, "recent_s": recent}
    )
    row = await cur.fetchone()
    return bool(row and row["busy"])


class Pacer:
    """Call :meth:`breathe` between batches: while ``probe`` says searches run, it rests
    so that the work since the last call is ``duty_cycle`` of the time."""

    def __init__(
        self,
        config: PacingConfig,
        probe: Probe | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self._probe = probe
        self._clock = clock
        self._sleep = sleep
        self._resumed = clock()
        self._probed_at = float("-inf")
        self._busy = False
        self.paused = 0.0  # seconds rested in all
        self.pauses = 0

    @classmethod
    def on(cls, conn: AsyncConn, config: PacingConfig) -> Pacer:
        """A pacer that asks PostgreSQL on ``conn`` (between batches) whether searches run."""

        async def probe() -> bool:
            return await searches_running(conn, config.recent)

        return cls(config, probe)

    async def _searching(self, now: float) -> bool:
        if self._probe is None:
            return True  # nothing to ask: always yield
        if now - self._probed_at >= self.config.probe_every:
            self._busy = await self._probe()
            self._probed_at = now
        return self._busy

    async def breathe(self) -> None:
        duty = self.config.duty_cycle
        now = self._clock()
        worked = now - self._resumed
        if duty < 1 and worked > 0 and await self._searching(now):
            pause = min(self.config.max_pause, worked * (1 - duty) / duty)
            self.paused += pause
            self.pauses += 1
            await self._sleep(pause)
        self._resumed = self._clock()
