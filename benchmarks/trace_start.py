"""Where an idle worker's start latency goes: timestamps along one job's path.

Run from the repository root::

    HERALD_DATABASE_URL=postgresql://user@host/db python -m benchmarks.trace_start
    HERALD_DATABASE_URL=... python -m benchmarks.trace_start --samples 500 --baseline ../old

Like bench_core's latency figure (one ``herald worker`` process, idle, single ``enqueue``
calls 20 ms apart), with probes in the worker process that note when the notification
reached its listener, when the fetch loop resumed, when the claim was sent and answered,
and when the handler began. The database adds when it began the admission (the job's
``created_at``) and the claim (``attempted_at``). Every stamp is the host's real-time
clock, which the local server's ``now()`` reads too (the server must be on this host).
Prints the median and p90 of each step, which add up to the whole.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from benchmarks import bench_compare, bench_core
from herald import loop
from herald.client import Client
from herald.config import Settings
from herald.context import JobContext
from herald.db import connect, conninfo
from herald.registry import Herald

app = Herald()
# The worker process's latest stamps (one job at a time, so the latest are the job's).
_PROBES: dict[str, float] = {}
_STAMPS = """
SELECT id, extract(epoch FROM created_at)::float8 AS admitted,
       extract(epoch FROM attempted_at)::float8 AS claimed, result
FROM jobs WHERE state = 'succeeded' ORDER BY id
"""
# (step, from, to): consecutive stamps of one job's path, in the order they happen.
STEPS = [
    ("enqueue call -> server began the insert", "t0", "admitted"),
    ("insert, durable commit, NOTIFY -> listener has it", "admitted", "notified"),
    ("listener -> fetch loop resumed", "notified", "woken"),
    ("fetch loop -> claim sent", "woken", "claim_sent"),
    ("claim sent -> server began it", "claim_sent", "claimed"),
    ("claim, durable commit -> worker has the rows", "claimed", "claim_back"),
    ("rows -> handler began", "claim_back", "started"),
]


@app.task("trace.stamp", queue="trace")
async def stamp(ctx: JobContext, payload: dict[str, Any]) -> dict[str, float]:
    return {**_PROBES, "started": time.time()}


def install_probes() -> None:
    """Note the moments along the worker's path (its process only)."""
    from herald import worker as worker_module

    _PROBES["gc_ms"] = 0.0
    began: list[float] = []

    def collecting(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[:] = [time.perf_counter()]
        elif began:
            _PROBES["gc_ms"] += (time.perf_counter() - began[0]) * 1000

    gc.callbacks.append(collecting)

    notifies = psycopg.AsyncConnection.notifies

    async def noted(self: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for note in notifies(self, **kwargs):
            _PROBES["notified"] = time.time()
            _PROBES["gc_ms"] = 0.0  # collections from here to the handler are on the path
            yield note

    psycopg.AsyncConnection.notifies = noted  # type: ignore[method-assign,assignment]

    wait_for_work = worker_module.Worker._wait_for_work

    async def woken(self: Any) -> None:
        await wait_for_work(self)
        _PROBES["woken"] = time.time()

    worker_module.Worker._wait_for_work = woken  # type: ignore[method-assign]

    namespace = vars(worker_module)  # the worker calls its module's name `bounded`
    bounded: Callable[[Awaitable[Any], float], Awaitable[Any]] = namespace["bounded"]

    async def timed(work: Awaitable[Any], seconds: float) -> Any:
        _PROBES["claim_sent"] = time.time()
        try:
            return await bounded(work, seconds)
        finally:
            _PROBES["claim_back"] = time.time()

    namespace["bounded"] = timed


async def trace(url: str, samples: int, gap: float, source: Path | None) -> dict[str, list[float]]:
    """The steps (ms) of ``samples`` jobs, and their totals (``"total"``)."""
    async with bench_core.fresh_schema(url) as settings, await Client.open(app, settings) as client:
        sent: dict[int, tuple[float, float]] = {}
        with _TracedWorker(settings, source) as worker:
            await worker.started()
            for n in range(samples):
                t0 = time.time()
                job = await client.enqueue("trace.stamp", {"n": n})
                sent[job.id] = (t0, time.time())
                await asyncio.sleep(gap)
            await bench_core.wait_drained(settings, within=60)
        conn = await connect(conninfo(url, settings.schema))
        async with conn:
            cur = await conn.execute(_STAMPS)
            rows = await cur.fetchall()
    if len(rows) != samples:
        raise RuntimeError(f"{samples - len(rows)} traced jobs did not succeed")
    steps: dict[str, list[float]] = {name: [] for name, _, _ in STEPS}
    steps["total"], steps["enqueue call (client)"] = [], []
    steps["worker's garbage collection, notified -> handler"] = []
    for row in rows:
        t0, returned = sent[row["id"]]
        at = {"t0": t0, "admitted": row["admitted"], "claimed": row["claimed"], **row["result"]}
        for name, start, end in STEPS:
            steps[name].append((at[end] - at[start]) * 1000)
        steps["total"].append((at["started"] - t0) * 1000)
        steps["enqueue call (client)"].append((returned - t0) * 1000)
        steps["worker's garbage collection, notified -> handler"].append(at["gc_ms"])
    return steps


class _TracedWorker(bench_core.WorkerProcesses):
    """One ``herald worker`` (concurrency 100, as bench_core's latency) with the probes."""

    def __init__(self, settings: Settings, source: Path | None) -> None:
        super().__init__(settings, 1, 100, None, source)

    def __enter__(self) -> _TracedWorker:
        env = dict(os.environ)
        env.update(
            HERALD_DATABASE_URL=str(self.settings.database_url), HERALD_SCHEMA=self.settings.schema
        )
        command = [sys.executable, "-m", "benchmarks.trace_start", "--worker"]
        self.spawn(command, env, 1, self.source)
        return self


def run_traced_worker() -> int:
    """The worker process: probes installed, then ``herald worker`` as in production."""
    from benchmarks import trace_start  # the module --app loads: the same probes
    from herald import cli

    trace_start.install_probes()
    return cli.main(["--app", "benchmarks.trace_start:app", "worker", "--concurrency", "100"])


def report(name: str, steps: dict[str, list[float]], slow: int = 4) -> None:
    def p90(values: list[float]) -> float:
        return bench_core.percentile(sorted(values), 90)

    print(f"{name} ({bench_compare.load()})")
    rows: list[tuple[str, Callable[[list[float]], float]]] = [
        ("median", statistics.median),
        ("p90", p90),
    ]
    print(f"  {'step':<52} " + " ".join(f"{label:>8}" for label, _ in rows))
    for step in [*(s for s, _, _ in STEPS), *list(steps)[len(STEPS) :]]:
        figures = " ".join(f"{fn(steps[step]):>8.3f}" for _, fn in rows)
        print(f"  {step:<52} {figures} ms")
    medians = sum(statistics.median(steps[s]) for s, _, _ in STEPS)
    print(f"  {'(sum of the step medians)':<52} {medians:>8.3f} ms")
    first = ", ".join(f"{v:.2f}" for v in steps["total"][:6])
    print(f"  the first jobs after the worker started, in order: {first} ms")
    slowest = sorted(range(len(steps["total"])), key=steps["total"].__getitem__)[-slow:]
    for i in reversed(slowest):
        parts = ", ".join(f"{steps[name][i]:.2f}" for name in steps)
        print(f"  a slow one (sample {i}): {parts} ms")
    print(flush=True)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--gap", type=float, default=0.02, help="seconds between jobs")
    parser.add_argument("--repeat", type=int, default=1, help="runs (in turn with --baseline)")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout, in turn")
    args = parser.parse_args(argv)
    url = os.environ.get("HERALD_DATABASE_URL")
    if not url:
        parser.error("set HERALD_DATABASE_URL to a PostgreSQL server on this host")
    sources = {"this checkout": None, **({"baseline": args.baseline} if args.baseline else {})}
    for _ in range(args.repeat):
        for name, source in sources.items():
            report(name, await trace(url, args.samples, args.gap, source))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        raise SystemExit(run_traced_worker())
    raise SystemExit(loop.run(main(), Settings.from_env().event_loop))
