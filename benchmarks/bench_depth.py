"""Speed at depth: the drain rate with a deep backlog, and a long steady run.

Run from the repository root::

    HERALD_DATABASE_URL=postgresql://user@host/db python -m benchmarks.bench_depth depth
    HERALD_DATABASE_URL=... python -m benchmarks.bench_depth soak --minutes 30 --rate 5000

``depth`` fills a fresh schema with ``--shallow`` (10,000) and with ``--deep``
(1,000,000) waiting no-op jobs, in turn (``--repeat`` times each), starts one worker
process and takes the rate of the first ``--sample`` jobs it finishes on the database
clock (first claim to last completion among them). It prints both rates and their ratio.

``soak`` starts one worker process (with a short retention, so the pruner deletes
finished jobs as in a steady deployment) and enqueues ``--rate`` jobs a second for
``--minutes``. Every ``--every`` seconds it samples, on the database clock: jobs
admitted and finished in the interval, the backlog, the jobs table's heap and index
sizes, its dead tuples, vacuums (autovacuum's and the worker's own), and enqueue-to-start
latency (``attempted_at - created_at`` of the jobs started in the interval: p50, p99).
Samples are written as CSV and drawn as an SVG (``--out``; see benchmarks/svgplot.py),
with nothing but the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import os
import signal
import statistics
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import psycopg

from benchmarks import bench_core, svgplot
from benchmarks.bench_app import app
from herald import loop
from herald.client import Client, JobSpec
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo

_FINISHED = "SELECT count(*) AS n FROM jobs WHERE finished_at IS NOT NULL"
# The first `n` jobs to finish: their rate on the database clock.
_FIRST_RATE = """
SELECT count(*) AS n, extract(epoch FROM max(finished_at) - min(attempted_at))::float8 AS s
FROM (SELECT attempted_at, finished_at FROM jobs WHERE finished_at IS NOT NULL
      ORDER BY finished_at LIMIT %(n)s) f
"""
_SAMPLE = """
SELECT
  (SELECT count(*) FROM jobs WHERE created_at > now() - make_interval(secs => %(s)s)) AS admitted,
  (SELECT count(*) FROM jobs WHERE finished_at > now() - make_interval(secs => %(s)s)) AS finished,
  (SELECT count(*) FROM jobs WHERE state = 'waiting') AS backlog,
  (SELECT count(*) FROM jobs) AS rows,
  pg_relation_size('jobs') AS heap_bytes,
  pg_indexes_size('jobs') AS index_bytes,
  (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass) AS dead_tuples,
  (SELECT autovacuum_count FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass)
      AS autovacuums,
  (SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass) AS vacuums,
  (SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (
       ORDER BY extract(epoch FROM attempted_at - created_at) * 1000)
   FROM jobs WHERE attempted_at > now() - make_interval(secs => %(s)s)) AS latency_ms
"""


# --- depth ----------------------------------------------------------------------------------


async def fill(settings: Settings, jobs: int) -> None:
    async with await Client.open(app, settings) as client:
        for i in range(0, jobs, 5000):
            chunk = [JobSpec("bench.noop", {"n": i + j}) for j in range(min(5000, jobs - i))]
            await client.enqueue_many(chunk)


async def first_rate(url: str, waiting: int, sample: int, concurrency: int) -> float:
    """Jobs/s of the first ``sample`` jobs one worker finishes with ``waiting`` queued."""
    async with bench_core.fresh_schema(url) as settings:
        await fill(settings, waiting)
        conn = await connect(conninfo(url, settings.schema))
        async with conn:
            await conn.execute("VACUUM ANALYZE jobs")  # as autovacuum leaves a settled table
            # As a server that has held the backlog a while has written it out: else the
            # checkpoint the fill made due runs during the deep run's drain (0.64 -> 0.90).
            with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                await conn.execute(bench_core.CHECKPOINT)
            with bench_core.WorkerProcesses(settings, 1, concurrency, None) as workers:
                await workers.started()
                deadline = time.monotonic() + max(120.0, sample / 100)
                while await _count(conn, _FINISHED) < sample:
                    workers.check_alive(deadline)
                    await asyncio.sleep(0.2)
            cur = await conn.execute(_FIRST_RATE, {"n": sample})
            row = await cur.fetchone()
    assert row is not None and row["n"] == sample
    return float(sample / row["s"])


async def _count(conn: AsyncConn, query: str) -> int:
    cur = await conn.execute(query)
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def depth(args: argparse.Namespace, url: str) -> None:
    rates: dict[int, list[float]] = {args.shallow: [], args.deep: []}
    for _ in range(args.repeat):
        for waiting in rates:
            rate = await first_rate(url, waiting, min(args.sample, waiting), args.concurrency)
            rates[waiting].append(rate)
            print(f"  {waiting:>9,} waiting: {rate:>8,.0f} jobs/s   ({load()})", flush=True)
    shallow, deep = (statistics.median(rates[w]) for w in (args.shallow, args.deep))
    if args.out:
        write_depth(Path(args.out), args.sample, args.concurrency, rates)
    print(
        f"median drain rate, first {args.sample:,} jobs, concurrency {args.concurrency}: "
        f"{args.shallow:,} waiting {shallow:,.0f} jobs/s, {args.deep:,} waiting "
        f"{deep:,.0f} jobs/s, ratio {deep / shallow:.2f}"
    )


def write_depth(out: Path, sample: int, concurrency: int, rates: dict[int, list[float]]) -> None:
    """Each run's rate, as CSV and as a chart (one line per backlog size)."""
    with out.with_suffix(".csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run", "waiting", "jobs_per_s"])
        for waiting, runs in rates.items():
            writer.writerows([n, waiting, round(rate)] for n, rate in enumerate(runs, 1))
    runs = list(range(1, len(next(iter(rates.values()))) + 1))
    out.with_suffix(".svg").write_text(
        svgplot.render(
            f"Drain rate of the first {sample:,} jobs, one worker at concurrency {concurrency}",
            [float(n) for n in runs],
            [
                svgplot.Panel(
                    "jobs/s", {f"{waiting:,} waiting": values for waiting, values in rates.items()}
                )
            ],
            x_label="run",
        )
    )
    print(f"written {out.with_suffix('.csv')} and {out.with_suffix('.svg')}")


# --- soak -----------------------------------------------------------------------------------


@dataclass
class Sample:
    minute: float
    admitted_per_s: float
    finished_per_s: float
    backlog: int
    rows: int
    heap_mb: float
    index_mb: float
    dead_tuples: int
    autovacuums: int
    vacuums: int  # run by the worker itself (see herald.maintenance)
    latency_p50_ms: float
    latency_p99_ms: float


async def produce(settings: Settings, rate: int, seconds: float, stop: asyncio.Event) -> int:
    """Enqueue ``rate`` jobs a second in ticks of 0.1 s; returns how many were admitted."""
    per_tick = max(1, rate // 10)
    admitted = 0
    async with await Client.open(app, settings) as client:
        start = time.monotonic()
        tick = 0
        while not stop.is_set() and time.monotonic() - start < seconds:
            chunk = [JobSpec("bench.noop", {"n": admitted + j}) for j in range(per_tick)]
            await client.enqueue_many(chunk)
            admitted += per_tick
            tick += 1
            # Paced on the clock: a tick that ran late is not made up for by a burst.
            await asyncio.sleep(max(0.0, start + tick * 0.1 - time.monotonic()))
    return admitted


async def sample(conn: AsyncConn, start: float, every: float) -> Sample:
    cur = await conn.execute(_SAMPLE, {"s": every})
    row = await cur.fetchone()
    assert row is not None
    p50, p99 = row["latency_ms"] or [0.0, 0.0]
    return Sample(
        minute=round((time.monotonic() - start) / 60, 2),
        admitted_per_s=row["admitted"] / every,
        finished_per_s=row["finished"] / every,
        backlog=row["backlog"],
        rows=row["rows"],
        heap_mb=round(row["heap_bytes"] / 2**20, 1),
        index_mb=round(row["index_bytes"] / 2**20, 1),
        dead_tuples=row["dead_tuples"] or 0,
        autovacuums=row["autovacuums"] or 0,
        vacuums=row["vacuums"] or 0,
        latency_p50_ms=round(p50, 2),
        latency_p99_ms=round(p99, 2),
    )


async def soak(args: argparse.Namespace, url: str) -> None:
    seconds = args.minutes * 60
    out = Path(args.out)
    samples: list[Sample] = []
    async with bench_core.fresh_schema(url) as settings:
        os.environ.update(
            HERALD_RETENTION=str(args.retention), HERALD_PRUNE_INTERVAL=str(args.every)
        )
        conn = await connect(conninfo(url, settings.schema))
        async with conn:
            with bench_core.WorkerProcesses(settings, 1, args.concurrency, None) as workers:
                await workers.started()
                stop = asyncio.Event()
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
                producing = asyncio.create_task(produce(settings, args.rate, seconds, stop))
                start = time.monotonic()
                while not producing.done():
                    await asyncio.wait({producing}, timeout=args.every)
                    samples.append(await sample(conn, start, args.every))
                    s = samples[-1]
                    print(
                        f"  {s.minute:>6.2f} min  in {s.admitted_per_s:>7,.0f}/s  out "
                        f"{s.finished_per_s:>7,.0f}/s  backlog {s.backlog:>8,}  rows {s.rows:>9,}"
                        f"  heap {s.heap_mb:>7.1f} MB  indexes {s.index_mb:>6.1f} MB  "
                        f"dead {s.dead_tuples:>9,}  vacuums {s.autovacuums}+{s.vacuums}  "
                        f"latency p50 {s.latency_p50_ms:.1f} / p99 {s.latency_p99_ms:.1f} ms"
                        f"  ({load()})",
                        flush=True,
                    )
                admitted = producing.result()
    write(out, samples)
    steady = samples[1:] or samples
    print(
        f"admitted {admitted:,} jobs in {args.minutes:g} min (target {args.rate:,}/s, "
        f"achieved {admitted / seconds:,.0f}/s); finished median "
        f"{statistics.median(s.finished_per_s for s in steady):,.0f}/s; heap "
        f"{min(s.heap_mb for s in steady)}-{max(s.heap_mb for s in steady)} MB, indexes "
        f"{min(s.index_mb for s in steady)}-{max(s.index_mb for s in steady)} MB; "
        f"written {out.with_suffix('.csv')} and {out.with_suffix('.svg')}"
    )


def write(out: Path, samples: list[Sample]) -> None:
    names = [f.name for f in fields(Sample)]
    with out.with_suffix(".csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=names)
        writer.writeheader()
        writer.writerows(asdict(s) for s in samples)
    minutes = [s.minute for s in samples]
    out.with_suffix(".svg").write_text(
        svgplot.render(
            "Steady run: one worker, jobs in and out",
            minutes,
            [
                svgplot.Panel(
                    "jobs/s",
                    {
                        "admitted": [s.admitted_per_s for s in samples],
                        "finished": [s.finished_per_s for s in samples],
                    },
                ),
                svgplot.Panel(
                    "MB",
                    {
                        "jobs heap": [s.heap_mb for s in samples],
                        "jobs indexes": [s.index_mb for s in samples],
                    },
                ),
                svgplot.Panel(
                    "start latency, ms",
                    {
                        "p50": [s.latency_p50_ms for s in samples],
                        "p99": [s.latency_p99_ms for s in samples],
                    },
                ),
            ],
        )
    )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="what", required=True)
    d = sub.add_parser("depth", help="drain rate, shallow vs deep backlog")
    d.add_argument("--shallow", type=int, default=10_000)
    d.add_argument("--deep", type=int, default=1_000_000)
    d.add_argument("--sample", type=int, default=10_000, help="jobs whose rate is taken")
    d.add_argument("--repeat", type=int, default=2)
    d.add_argument("--concurrency", type=int, default=200)
    d.add_argument("--out", default="", help="also write CSV and SVG here (no suffix)")
    s = sub.add_parser("soak", help="a steady rate in and out, sampled over time")
    s.add_argument("--minutes", type=float, default=30.0)
    s.add_argument("--rate", type=int, default=5000, help="jobs admitted per second")
    s.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    s.add_argument("--retention", type=float, default=60.0, help="finished jobs kept, s")
    s.add_argument("--concurrency", type=int, default=200)
    s.add_argument("--out", default="soak", help="CSV and SVG file name (no suffix)")
    args = parser.parse_args(argv)
    url = os.environ.get("HERALD_DATABASE_URL")
    if not url:
        parser.error("set HERALD_DATABASE_URL to the PostgreSQL server to measure against")
    print(f"machine:  {bench_core.machine()}; {load()}", flush=True)
    await (depth(args, url) if args.what == "depth" else soak(args, url))
    return 0


if __name__ == "__main__":
    raise SystemExit(loop.run(main(), Settings.from_env().event_loop))
