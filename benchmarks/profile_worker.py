"""Where a worker's time goes per job: one worker in this process, under cProfile.

Run from the repository root::

    HERALD_DATABASE_URL=postgresql://user@host/db python -m benchmarks.profile_worker
    HERALD_DATABASE_URL=... python -m benchmarks.profile_worker --concurrency 200 --top 40

It enqueues ``--jobs`` no-op jobs in a fresh schema, runs one :class:`herald.worker.Worker`
on this process's event loop until they are all recorded, and prints the drain rate
(database clock, as bench_core), the CPU time per job of the worker's thread, of the
whole process and of the PostgreSQL backends serving its connections
(:mod:`benchmarks.accounting`), and the functions that took the most time, cumulative
and own, per job. The profiler slows everything down (about 2x): read the shares, not
the rate; ``--no-profile`` gives the CPU figures without it (``--repeat`` runs in a row).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import resource
import time

from benchmarks import bench_compare, bench_core
from benchmarks.accounting import Ledger, spent
from benchmarks.bench_app import app
from herald import loop
from herald.client import Client, JobSpec
from herald.config import Settings
from herald.db import connect, conninfo
from herald.worker import Worker


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def profile(
    url: str, jobs: int, concurrency: int, top: int, profiled: bool, prefetch: int | None = None
) -> str:
    async with bench_core.fresh_schema(url) as settings:
        async with await Client.open(app, settings) as client:
            for i in range(0, jobs, 5000):
                chunk = [JobSpec("bench.noop", {"n": i + j}) for j in range(min(5000, jobs - i))]
                await client.enqueue_many(chunk)
        worker = Worker(
            app, concurrency=concurrency, settings=settings, maintenance=False, prefetch=prefetch
        )
        # CPU time of this thread: on a loaded machine wall time mostly measures waiting.
        profiler = cProfile.Profile(time.thread_time)
        running = asyncio.create_task(worker.run())
        cpu, process = time.thread_time(), _process_cpu()
        if profiled:
            profiler.enable()
        try:
            backends = await _wait_drained(settings, within=max(60.0, jobs / 200))
        finally:
            profiler.disable()
            cpu, process = time.thread_time() - cpu, _process_cpu() - process
            worker.stop()
            await running
        ok, span = await bench_compare._span(settings)
        if ok != jobs:
            raise RuntimeError(f"expected {jobs} succeeded jobs, found {ok}")
        rate = jobs / span
    out = io.StringIO()
    # CPU time per job: unlike the rate, hardly moved by the machine's load.
    out.write(
        f"concurrency {concurrency}: {rate:,.0f} jobs/s (database clock); CPU per job: "
        f"{cpu / jobs * 1e6:.1f} us the worker's thread, {process / jobs * 1e6:.1f} us its "
        f"process, {backends / jobs * 1e6:.1f} us its database backends "
        f"({bench_compare.load()})\n"
    )
    if profiled:
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


async def _wait_drained(settings: Settings, within: float) -> float:
    """Like bench_core's, on one connection polled twice a second: the worker's CPU time
    is read on this thread, and connecting anew for each poll would count in it.

    Returns the CPU seconds the worker's database backends spent, from their start to
    the end of the drain (this poll's own backend left out)."""
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        ledger = Ledger(conn)
        ledger.add("worker", [os.getpid()])

        async def pending() -> bool:
            cur = await conn.execute(bench_core._PENDING)
            row = await cur.fetchone()
            return bool(row and row["pending"])

        deadline = time.monotonic() + within
        while await pending():
            if time.monotonic() > deadline:
                raise RuntimeError("jobs were not drained in time")
            await asyncio.sleep(0.5)
        after = await ledger.snapshot()
        after["worker db"].pop(conn.info.backend_pid, None)
        return spent({}, after)["worker db"]


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    parser.add_argument("--no-profile", action="store_true", help="only the rate and CPU")
    parser.add_argument("--repeat", type=int, default=1, help="runs in a row")
    parser.add_argument(
        "--prefetch", default="", help="jobs claimed ahead (comma-separated: each in turn)"
    )
    args = parser.parse_args(argv)
    url = os.environ.get("HERALD_DATABASE_URL")
    if not url:
        parser.error("set HERALD_DATABASE_URL to the PostgreSQL server to measure against")
    prefetches: list[int | None] = [int(p) for p in args.prefetch.split(",") if p] or [None]
    for _ in range(args.repeat):
        for prefetch in prefetches:
            if prefetch is not None:
                print(f"prefetch {prefetch}:")
            print(
                await profile(
                    url, args.jobs, args.concurrency, args.top, not args.no_profile, prefetch
                )
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(loop.run(main(), Settings.from_env().event_loop))
