"""Core benchmark: admission rates, end-to-end drain, enqueue-to-start latency.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_core            # every figure, 3 runs each
    .venv/bin/python -m benchmarks.bench_core --only drain --repeat 5

It talks to ``HERALD_DATABASE_URL`` (or boots the embedded PostgreSQL when unset). Every
measurement gets a fresh schema of its own, created, migrated and dropped here, so the
figures never depend on what an earlier run left behind. Worker processes are started
with ``python -m herald --app benchmarks.bench_app:app worker``, exactly as in production.

Clocks: admission rates use the host's monotonic clock around the calls. Drain rates use
the database clock (first claim to last completion, all read from the jobs table), so
process start-up is not counted. Latency compares the host's monotonic clock just before
``enqueue`` with the same clock read by the handler as it starts (it is system-wide).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.bench_app import app
from herald import loop
from herald.client import Client, JobSpec
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo, database_url
from herald.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent

# Measurement queries (the benchmark reads the jobs table directly, like a test would).
# (EXISTS reads one entry of a partial index: cheap enough to poll during a drain.)
_PENDING = "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('waiting', 'running')) AS pending"
_DRAIN_SPAN = """
SELECT count(*) AS n,
       count(*) FILTER (WHERE state = 'succeeded') AS ok,
       extract(epoch FROM max(finished_at) - min(attempted_at))::float8 AS span_s
FROM jobs
"""
_STARTED = "SELECT id, (result->>'started')::float8 AS started FROM jobs WHERE state = 'succeeded'"
# Like pgbench before each run: write out what earlier figures left dirty, so a figure
# does not pay for the previous one's checkpoint. Needs a superuser (or pg_checkpoint).
CHECKPOINT = "CHECKPOINT"
_VERSION = "SHOW server_version"
_SYNC_COMMIT = "SHOW synchronous_commit"
_FSYNC = "SHOW fsync"


# --- plumbing -----------------------------------------------------------------------------


@asynccontextmanager
async def fresh_schema(url: str) -> AsyncIterator[Settings]:
    """A newly migrated schema of the benchmark's own, dropped afterwards."""
    name = f"bench_{uuid.uuid4().hex[:10]}"
    conn = await connect(conninfo(url, name))
    try:
        await migrate(conn, name)
        # Without the privilege the figures include whatever checkpoint falls due.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            await conn.execute(CHECKPOINT)
        yield Settings(database_url=url, schema=name)
    finally:
        await conn.execute(
            psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(name))
        )
        await conn.close()


async def scalar(settings: Settings, query: str) -> Any:
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        cur = await conn.execute(query)
        row = await cur.fetchone()
    assert row is not None
    return next(iter(row.values()))


class Processes:
    """Child processes started with a log file each, stopped cleanly on exit."""

    def __init__(self, prefix: str) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)

    def spawn(
        self, command: list[str], env: dict[str, str], count: int, source: Path | None = None
    ) -> None:
        """``count`` processes of ``command``, their output in a log file each.

        ``source``: another checkout whose ``herald`` package the processes import instead
        of this one's (to measure two versions side by side)."""
        first = [str(source / "src")] if source is not None else []
        env = {
            **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [*first, str(ROOT), env.get("PYTHONPATH")])),
        }
        for _ in range(count):
            log = Path(self._dir.name) / f"worker-{len(self.logs)}.log"
            self.logs.append(log)
            with log.open("wb") as out:
                self.procs.append(
                    subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=out)
                )

    def check_alive(self, deadline: float) -> None:
        """Raise if a process exited early or ``deadline`` (monotonic) has passed."""
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not start in time")

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._dir.cleanup()


class WorkerProcesses(Processes):
    """``count`` worker processes on ``settings``' schema, started and stopped cleanly."""

    def __init__(
        self,
        settings: Settings,
        count: int,
        concurrency: int,
        batch: int | None,
        source: Path | None = None,
    ):
        super().__init__("herald-bench-")
        self.settings = settings
        self.source = source
        self.count = count
        self.args = ["--concurrency", str(concurrency)]
        if batch is not None:
            self.args += ["--batch", str(batch)]

    def __enter__(self) -> WorkerProcesses:
        env = dict(os.environ)
        env.update(
            HERALD_DATABASE_URL=str(self.settings.database_url),
            HERALD_SCHEMA=self.settings.schema,
        )
        command = [sys.executable, "-m", "herald", "--app", "benchmarks.bench_app:app"]
        self.spawn([*command, "worker", *self.args], env, self.count, self.source)
        return self

    async def started(self, within: float = 30.0) -> None:
        """Wait until every worker logged that it runs (its pool and listener are up)."""
        deadline = time.monotonic() + within
        while not all("started on queues" in log.read_text() for log in self.logs):
            self.check_alive(deadline)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # listener connected, first (empty) claim done


async def wait_until_done(pending: Callable[[], Awaitable[bool]], within: float) -> None:
    """Poll ``pending`` every 0.1 s until it is false; an error after ``within`` s."""
    deadline = time.monotonic() + within
    while await pending():
        if time.monotonic() > deadline:
            raise RuntimeError("jobs were not drained in time")
        await asyncio.sleep(0.1)


async def wait_drained(settings: Settings, within: float) -> None:
    async def pending() -> bool:
        return bool(await scalar(settings, _PENDING))

    await wait_until_done(pending, within)


# --- measurements -------------------------------------------------------------------------


async def bench_bulk(url: str, jobs: int, batch: int) -> float:
    """Jobs/s admitted with ``enqueue_many`` in batches of ``batch``."""
    async with fresh_schema(url) as settings, await Client.open(app, settings) as client:
        chunks = [
            [JobSpec("bench.noop", {"n": i + j}) for j in range(min(batch, jobs - i))]
            for i in range(0, jobs, batch)
        ]
        start = time.monotonic()
        for chunk in chunks:
            await client.enqueue_many(chunk)
        return jobs / (time.monotonic() - start)


async def bench_single(url: str, jobs: int) -> float:
    """Jobs/s admitted one ``enqueue`` call (one round trip and commit) at a time."""
    async with fresh_schema(url) as settings, await Client.open(app, settings) as client:
        start = time.monotonic()
        for n in range(jobs):
            await client.enqueue("bench.noop", {"n": n})
        return jobs / (time.monotonic() - start)


async def bench_drain(
    url: str,
    jobs: int,
    processes: int,
    concurrency: int,
    batch: int | None,
    source: Path | None = None,
) -> float:
    """No-op jobs/s run end to end by ``processes`` worker processes.

    The workers start on an empty queue; the jobs then appear in one commit. The rate
    is taken on the database clock from the first claim to the last completion.
    ``source``: run the Herald of another checkout (see :meth:`Processes.spawn`).
    """
    async with fresh_schema(url) as settings, await Client.open(app, settings) as client:
        with WorkerProcesses(settings, processes, concurrency, batch, source) as workers:
            await workers.started()
            conn: AsyncConn = await client.pool.getconn()
            try:
                async with conn.transaction():
                    for i in range(0, jobs, 5000):
                        specs = [
                            JobSpec("bench.noop", {"n": i + j}) for j in range(min(5000, jobs - i))
                        ]
                        await client.enqueue_many(specs, conn=conn)
            finally:
                await client.pool.putconn(conn)
            await wait_drained(settings, within=max(60.0, jobs / 200))
        conn = await connect(conninfo(url, settings.schema))
        async with conn:
            cur = await conn.execute(_DRAIN_SPAN)
            row = await cur.fetchone()
        assert row is not None
        if row["ok"] != jobs:
            raise RuntimeError(f"expected {jobs} succeeded jobs, found {row['ok']}")
        return float(jobs / row["span_s"])


async def bench_latency(
    url: str, samples: int, gap: float, source: Path | None = None
) -> tuple[list[float], list[float]]:
    """Enqueue-to-start latencies (ms) of single jobs admitted to an idle worker.

    Also returns how long each ``enqueue`` call itself took (ms): the admission's share.
    """
    async with fresh_schema(url) as settings, await Client.open(app, settings) as client:
        before: dict[int, float] = {}
        admission: list[float] = []
        with WorkerProcesses(settings, 1, 100, None, source) as workers:
            await workers.started()
            for n in range(samples):
                t0 = time.monotonic()
                job = await client.enqueue("bench.stamp", {"n": n})
                admission.append((time.monotonic() - t0) * 1000)
                before[job.id] = t0
                await asyncio.sleep(gap)  # the job finishes: the worker is idle again
            await wait_drained(settings, within=60)
        conn = await connect(conninfo(url, settings.schema))
        async with conn:
            cur = await conn.execute(_STARTED)
            started = {row["id"]: row["started"] for row in await cur.fetchall()}
    if set(started) != set(before):
        raise RuntimeError("some latency jobs did not succeed")
    return sorted((started[i] - t0) * 1000 for i, t0 in before.items()), sorted(admission)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, round(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


# --- reporting ----------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


async def repeat(
    label: str, runs: int, measure: Callable[[], Awaitable[float]], unit: str = "jobs/s"
) -> None:
    values = []
    for _ in range(runs):
        values.append(await measure())
    shown = ", ".join(f"{v:,.0f}" for v in values)
    print(
        f"{label:<44} best {max(values):>9,.0f} {unit}   median "
        f"{statistics.median(values):>9,.0f} {unit}   (runs: {shown})",
        flush=True,
    )


def add_figure_options(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark of the four figures shares (sizes, runs, selection)."""
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure")
    parser.add_argument("--only", default="bulk,single,drain,latency", help="figures to run")
    parser.add_argument("--bulk-jobs", type=int, default=100_000)
    parser.add_argument("--bulk-batch", type=int, default=5_000)
    parser.add_argument("--single-jobs", type=int, default=2_000)
    parser.add_argument("--drain-jobs", type=int, default=50_000)
    parser.add_argument("--processes", default="1,4", help="worker process counts to drain with")
    parser.add_argument("--latency-samples", type=int, default=300)


def figures_wanted(parser: argparse.ArgumentParser, args: argparse.Namespace) -> set[str]:
    only = set(args.only.split(","))
    unknown = only - {"bulk", "single", "drain", "latency"}
    if unknown:
        parser.error(f"unknown figures: {', '.join(sorted(unknown))}")
    return only


@dataclass(frozen=True)
class Measures:
    """One run of each figure, for :func:`report` to repeat and print."""

    bulk: Callable[[], Awaitable[float]]
    single: Callable[[], Awaitable[float]]
    drain: Callable[[int], Awaitable[float]]  # worker processes -> jobs/s
    latency: Callable[[], Awaitable[tuple[list[float], list[float]]]]


async def report(args: argparse.Namespace, only: set[str], measures: Measures) -> None:
    """Measure the wanted figures ``args.repeat`` times each and print them."""
    runs = args.repeat
    if "bulk" in only:
        await repeat(
            f"bulk enqueue ({args.bulk_jobs:,} in batches of {args.bulk_batch:,})",
            runs,
            measures.bulk,
        )
    if "single" in only:
        await repeat(f"single enqueue ({args.single_jobs:,}, one at a time)", runs, measures.single)
    if "drain" in only:
        for count in (int(p) for p in args.processes.split(",")):
            await repeat(
                f"drain {args.drain_jobs:,} no-op jobs, {count} worker process(es)",
                runs,
                lambda count=count: measures.drain(count),  # type: ignore[misc]
            )
    if "latency" in only:
        p50s, p95s, p99s = [], [], []
        for _ in range(runs):
            lat, admission = await measures.latency()
            p50s.append(percentile(lat, 50))
            p95s.append(percentile(lat, 95))
            p99s.append(percentile(lat, 99))
            print(
                f"  latency run: p50 {p50s[-1]:.2f} ms  p95 {p95s[-1]:.2f} ms  "
                f"p99 {p99s[-1]:.2f} ms  (max {lat[-1]:.2f} ms, {len(lat)} jobs; the enqueue "
                f"call itself: p50 {percentile(admission, 50):.2f} ms)",
                flush=True,
            )
        print(
            f"{'enqueue-to-start latency, idle worker':<44} "
            f"best p50 {min(p50s):.2f} / p95 {min(p95s):.2f} / p99 {min(p99s):.2f} ms   "
            f"median p50 {statistics.median(p50s):.2f} / p95 {statistics.median(p95s):.2f}"
            f" / p99 {statistics.median(p99s):.2f} ms"
        )


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_figure_options(parser)
    parser.add_argument("--concurrency", type=int, default=1000, help="handlers per worker")
    parser.add_argument("--batch", type=int, default=None, help="claim batch (worker default)")
    args = parser.parse_args(argv)
    only = figures_wanted(parser, args)

    url = database_url(Settings.from_env())
    where = "HERALD_DATABASE_URL" if os.environ.get("HERALD_DATABASE_URL") else "embedded"
    async with fresh_schema(url) as probe:
        version = await scalar(probe, _VERSION)
        sync = await scalar(probe, _SYNC_COMMIT)
        fsync = await scalar(probe, _FSYNC)
    print(f"machine:  {machine()}")
    print(f"database: PostgreSQL {version} ({where}), synchronous_commit={sync}, fsync={fsync}")
    print(f"runs per figure: {args.repeat}\n", flush=True)
    await report(
        args,
        only,
        Measures(
            bulk=lambda: bench_bulk(url, args.bulk_jobs, args.bulk_batch),
            single=lambda: bench_single(url, args.single_jobs),
            drain=lambda count: bench_drain(
                url, args.drain_jobs, count, args.concurrency, args.batch
            ),
            latency=lambda: bench_latency(url, args.latency_samples, gap=0.02),
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(loop.run(main(), Settings.from_env().event_loop))
