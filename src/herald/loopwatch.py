"""Notices an event loop that was blocked: an ``async`` handler computing without
awaiting freezes every lease of its worker (no heartbeat, no self-fencing watchdog, no
claim can run until it yields).

A task sleeps a short tick and measures how late it woke. A lag past ``threshold``
(a quarter of the lease) is logged with the remedy and counted (``loop_blocked``,
exported as ``herald_worker_loop_blocked``). It can only tell afterwards: while the loop
is blocked nothing of the worker runs, this included. CPU-bound work belongs in a plain
``def`` handler (run on the worker's thread pool, the loop stays free) or a process pool.
"""

from __future__ import annotations

import asyncio
import logging

from herald.lease import WorkerStats

log = logging.getLogger(__name__)


class LoopWatch:
    def __init__(self, stats: WorkerStats, threshold: float, tick: float = 0.1) -> None:
        self.stats = stats
        self.threshold = threshold
        self.tick = tick
        self.longest = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.tick)
            lag = loop.time() - before - self.tick
            self.longest = max(self.longest, lag)
            if lag > self.threshold:
                self.stats.loop_blocked += 1
                log.warning(
                    "the event loop was blocked for %.2fs (more than %.2fs, a quarter of the "
                    "lease): leases went unrenewed meanwhile. An async handler computing "
                    "without awaiting? Make it a plain def handler (it runs on the thread "
                    "pool) or hand the work to a process pool",
                    lag,
                    self.threshold,
                )
