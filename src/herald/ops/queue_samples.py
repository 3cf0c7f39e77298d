"""Queue samples: what each queue holds, taken periodically so depth, running and the
oldest due job's age can be drawn over time (the console's overview charts them).

The jobs table only says what is true now; a finished job's row says when it ended, so
throughput can be read back from it, but not how deep a queue was at 3 a.m. A
housekeeping duty (one process of the deployment at a time) takes a sample every
:data:`SAMPLE_EVERY` seconds, one row per pass, and drops samples older than
:data:`KEEP_S`.

A pass counts every waiting and running job (about 0.3 s of one database core for
1,000,000 waiting), so its cost grows with the backlog, and the duty keeps it in bounds:

* the cadence is the deployment's, read from the table: a process that takes the duty
  over (at its start, or from a holder that stopped) samples when the latest sample is
  :data:`SAMPLE_EVERY` old, not at once; with no sample yet, one period after it took it;
* the period stretches so that passes take at most :data:`BUDGET` of the time (at
  10,000,000 waiting, a sample every few minutes instead of every half minute);
* a pass never runs in parallel workers (it would take every core for a monitoring count).
"""

from __future__ import annotations

import time

from herald import sql
from herald.ops.conn import Source, connection

DUTY = "queue-samples"
SAMPLE_EVERY = 30.0
KEEP_S = 25 * 3600  # the console's widest window is 24 h
BUDGET = 0.01  # of the wall clock, at most, spent in sampling passes


async def sample_queues(source: Source, keep_s: float = KEEP_S) -> None:
    """Record what every queue holds now, and drop samples older than ``keep_s``."""
    async with connection(source) as conn, conn.transaction():
        await conn.execute(sql.query("ops_queue_sample_serial"))
        await conn.execute(sql.query("ops_queue_sample"))
        await conn.execute(sql.query("ops_queue_sample_prune"), {"keep_s": keep_s})


async def latest_age(source: Source) -> float | None:
    """Seconds since the latest sample, on the database clock; None when there is none."""
    async with connection(source) as conn:
        cur = await conn.execute(sql.query("ops_queue_sample_latest"))
        row = await cur.fetchone()
    return None if row is None or row["age_s"] is None else float(row["age_s"])


class Cadence:
    """When the holder of the duty takes its next sample (see the module docstring)."""

    def __init__(self, every: float = SAMPLE_EVERY, budget: float = BUDGET) -> None:
        self.every = every
        self.budget = budget
        self.period = every  # stretched by what the last pass here cost
        self._none_since: float | None = None

    async def due_in(self, source: Source) -> float:
        """Seconds until the next sample is due (0: due now)."""
        age = await latest_age(source)
        if age is None:  # no sample yet: one period after this process first looked
            if self._none_since is None:
                self._none_since = time.monotonic()
            age = time.monotonic() - self._none_since
        return max(0.0, self.period - age)

    async def sample(self, source: Source, keep_s: float = KEEP_S) -> float:
        """One pass; the seconds it took (which sets the period from now on)."""
        started = time.monotonic()
        await sample_queues(source, keep_s)
        took = time.monotonic() - started
        self.period = max(self.every, took / self.budget)
        return took
