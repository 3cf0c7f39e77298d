"""Ingestion end to end: fetch+stage, processing, and search latency idle vs while ingesting.

Every figure runs against a real PostgreSQL (``HERALD_DATABASE_URL``, else the embedded
one) in a fresh schema of its own (created, migrated, dropped), with the provider
sandbox in a process of its own serving the snapshot over loopback HTTP.

- ``fetch``: one fetch of N plans (3 zones each) in a fresh process: the body streamed
  into the parser, batches staged with COPY under the run's fence, the run marked
  staged. Plans/s on the host clock from the request to the staged run, and the
  process's peak RSS (``ru_maxrss``): flat when 1M is within 20 % of 100k. Plans per
  CPU-second of the fetch process and of the sandbox (generating the document is the
  provider's cost, on the same machine here).
- ``process``: the staged run processed into canonical plans by 1 and by 2 processes
  (each draining the run with :func:`herald.ingest.processing.drain_run`, batches of
  ``--batch``), plans/s from their start to the run processed.
- ``search``: ``SearchService.search`` (the route's code path: bulkhead, pool, query;
  the cache is disabled so every call reaches PostgreSQL) over the canonical plans of
  the processed run: p50/p99 and requests/s with 1, 16 and 64 concurrent callers for
  ``--search-seconds`` each, idle, then again while ingestions of the same size (fetch,
  then two processing processes) run one after another in other processes (each
  ingesting figure says which phase was running when it ended). The bulkhead is sized
  to the largest concurrency so latency, not refusal, is measured (refusals are printed
  too). The ingesting rounds run once in the fetch phase and once in the processing
  phase (``--ingesting-phases``): each round waits for its phase to begin. Each round
  starts with an unmeasured warm-up (a connection per caller, the statement prepared on
  each). Then the ratio of p99 while ingesting to idle p99 per
  concurrency (the aim: at most 2x), and the background ingestion's own rate while
  searched (what yielding to searches costs it).

The ingesting children yield to searches as the jobs do (:mod:`herald.ingest.pacing`):
``HERALD_INGEST_DUTY_CYCLE=1 HERALD_INGEST_NICE=0`` runs them without yielding, for
side-by-side runs.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_ingest                       # 100k and 1M
    .venv/bin/python -m benchmarks.bench_ingest --sizes 100000 --search-seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

from psycopg import sql as psql

from benchmarks.bench_core import machine
from herald.config import Settings
from herald.db import connect, conninfo, database_url
from herald.migrate import migrate


def _settings(schema: str) -> Settings:
    base = Settings.from_env()
    return Settings(database_url=database_url(base), schema=schema, data_dir=base.data_dir)


async def _fresh_schema(url: str) -> str:
    schema = f"bench_ingest_{uuid.uuid4().hex[:8]}"
    async with await connect(conninfo(url, schema)) as conn:
        await migrate(conn, schema)
    return schema


async def _drop_schema(url: str, schema: str) -> None:
    async with await connect(conninfo(url, "public")) as conn:
        await conn.execute(psql.SQL("DROP SCHEMA {} CASCADE").format(psql.Identifier(schema)))


# --- child processes -----------------------------------------------------------------


async def child_fetch(schema: str, provider: str, url: str) -> dict[str, Any]:
    """Fetch and stage one snapshot as the fetch job does (fenced, COPY, marked staged)."""
    from herald.ingest.fetch import FetchPolicy, fetch_snapshot
    from herald.ingest.pacing import Pacer, PacingConfig, lower_priority
    from herald.ingest.staging import RunStager, mark_staged, start_run

    settings = _settings(schema)
    assert settings.database_url is not None
    async with await connect(conninfo(settings.database_url, schema)) as conn:
        cur = await conn.execute(
            "INSERT INTO jobs (kind, key, version, state, attempt, fence, lease_owner, "
            "lease_expires_at, attempted_at) VALUES ('ingest.fetch', %s, "
            "(SELECT count(*) + 1 FROM jobs WHERE key = %s), 'running', 1, 1, 'bench', "
            "herald_now() + interval '1 day', herald_now()) RETURNING id",
            (provider, provider),
        )
        job = await cur.fetchone()
        assert job is not None
        run = await start_run(conn, provider, job["id"], 1)
        stager = RunStager(conn, run["id"], provider, 1)
        # As the fetch job does: a lower priority, and a rest between batches while
        # searches run (HERALD_INGEST_NICE, HERALD_INGEST_DUTY_CYCLE).
        pacing = PacingConfig.from_env()
        lower_priority(pacing.nice)
        pacer = Pacer.on(conn, pacing)
        started = time.monotonic()
        result = await fetch_snapshot(
            url, "event-plans", stager, policy=FetchPolicy(), pace=pacer.breathe
        )
        await mark_staged(conn, run["id"], 1, bytes_read=result.bytes, attempts=1)
        seconds = time.monotonic() - started
        await conn.execute(
            "UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, "
            "finished_at = herald_now() WHERE id = %s",
            (job["id"],),
        )
    return {
        "run_id": run["id"],
        "plans": stager.staged,
        "seconds": seconds,
        "bytes": result.bytes,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu_seconds": _cpu(),
        "paused": pacer.paused,
    }


def _proc_cpu(pid: int) -> float:
    """CPU seconds another process has used (Linux ``/proc``): the sandbox's share."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    """The 1-minute load average now: figures on a shared machine need it beside them."""
    return f"{os.getloadavg()[0]:.1f}"


def _cpu() -> float:
    """This process's CPU time: on a loaded machine, plans per CPU-second say more."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def child_process(schema: str, run_id: int, batch: int) -> dict[str, Any]:
    from herald.ingest.pacing import Pacer, PacingConfig, lower_priority
    from herald.ingest.processing import drain_run

    settings = _settings(schema)
    assert settings.database_url is not None
    pacing = PacingConfig.from_env()
    lower_priority(pacing.nice)  # as the processing job does
    async with await connect(conninfo(settings.database_url, schema)) as conn:
        pacer = Pacer.on(conn, pacing)
        started = time.monotonic()
        stats = await drain_run(
            conn, run_id, f"bench-{os.getpid()}", batch=batch, poll=0.05, pace=pacer.breathe
        )
    return {"done": stats.done, "seconds": time.monotonic() - started, "paused": pacer.paused}


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_ingest", "--child", *args],
        stdout=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"a child process failed ({proc.returncode}): {out}")
    return dict(json.loads(out.strip().splitlines()[-1]))


# --- the figures ---------------------------------------------------------------------


async def _provider(url: str, schema: str, name: str, feed: str) -> None:
    from herald.ingest.providers import ProviderSpec, save_provider
    from herald.ops.audit import Note

    async with await connect(conninfo(url, schema)) as conn:
        await save_provider(conn, ProviderSpec(name=name, url=feed), note=Note("bench", "bench"))


async def _run_state(url: str, schema: str, run_id: int) -> str:
    async with await connect(conninfo(url, schema)) as conn:
        cur = await conn.execute("SELECT state FROM ingest_runs WHERE id = %s", (run_id,))
        row = await cur.fetchone()
        return "" if row is None else str(row["state"])


def fetch_once(schema: str, name: str, base: str, plans: int) -> dict[str, Any]:
    return _result(_spawn("fetch", schema, name, f"{base}/feeds/{name}?plans={plans}&zones=3"))


def process_with(schema: str, run_id: int, processes: int, batch: int) -> tuple[float, float]:
    """Plans/s, and the longest any process rested (searches elsewhere on the server)."""
    started = time.monotonic()
    procs = [_spawn("process", schema, str(run_id), str(batch)) for _ in range(processes)]
    results = [_result(p) for p in procs]
    done = sum(int(r["done"]) for r in results)
    return done / (time.monotonic() - started), max(float(r["paused"]) for r in results)


async def search_load(
    url: str, schema: str, concurrency: int, seconds: float
) -> tuple[float, float, float, int]:
    """p50 ms, p99 ms, requests/s, refusals over ``seconds`` with ``concurrency`` callers."""
    from prometheus_client import CollectorRegistry

    from herald.ingest.pacing import SEARCH_APPLICATION
    from herald.ingest.search import SearchSaturated, SearchService, SearchSettings, Window

    settings = SearchSettings(max_concurrent=64, cache_entries=0)
    # Named as the API's search pool is: ingestion sees these sessions and yields.
    info = conninfo(url, schema, SEARCH_APPLICATION)
    service = SearchService(info, schema, settings, CollectorRegistry())
    await service.open()
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    # Unmeasured warm-up: the pool opens a connection per caller and each connection
    # prepares the statement, as a long-running API process already has.
    for _ in range(3):
        await asyncio.gather(
            *(service.search(Window(base, base + dt.timedelta(days=3))) for _ in range(concurrency))
        )
    latencies: list[float] = []
    refused = 0
    stop = time.monotonic() + seconds

    async def caller(seed: int) -> None:
        nonlocal refused
        day = seed
        while time.monotonic() < stop:
            day = (day * 7 + 3) % 700
            start = base + dt.timedelta(days=day)
            window = Window(start, start + dt.timedelta(days=3))
            began = time.perf_counter()
            try:
                await service.search(window, limit=50)
            except SearchSaturated:
                refused += 1
                continue
            latencies.append(time.perf_counter() - began)

    try:
        await asyncio.gather(*(caller(i) for i in range(concurrency)))
    finally:
        await service.close()
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return p50, p99, len(latencies) / seconds, refused


async def main_async(args: argparse.Namespace) -> None:
    from herald.ingest.sandbox import spawn_sandbox

    url = database_url(Settings.from_env())
    from herald.ingest.pacing import PacingConfig

    pacing = PacingConfig.from_env()
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at start")
    print(
        f"Ingestion pacing: duty cycle {pacing.duty_cycle:g} while searches run,"
        f" nice {pacing.nice};"
        f" the provider sandbox at nice {args.provider_nice}"
    )
    async with await connect(conninfo(url, "public")) as conn:
        cur = await conn.execute("SHOW server_version")
        print(f"PostgreSQL {(await cur.fetchone() or {}).get('server_version')}")
    with spawn_sandbox() as sandbox:
        # The provider runs on a host of its own in production; here it shares the cores
        # with the searches, so it runs at a lower priority (--provider-nice) rather
        # than stand in for search-side load. Same for every figure and both sides of
        # a side-by-side run.
        os.setpriority(os.PRIO_PROCESS, sandbox.process.pid, args.provider_nice)
        for plans in args.sizes:
            schema = await _fresh_schema(url)
            try:
                await _provider(url, schema, "p1", f"{sandbox.base_url}/feeds/p1")
                generating = _proc_cpu(sandbox.process.pid)
                fetched = fetch_once(schema, "p1", sandbox.base_url, plans)
                generating = _proc_cpu(sandbox.process.pid) - generating
                print(
                    f"fetch+stage {plans:>9,} plans: {fetched['plans'] / fetched['seconds']:>9,.0f}"
                    f" plans/s ({fetched['seconds']:.1f} s, {fetched['bytes'] / 2**20:,.0f} MiB),"
                    f" peak RSS {fetched['peak_rss_mib']:.0f} MiB,"
                    f" {fetched['plans'] / fetched['cpu_seconds']:,.0f} plans per CPU-second"
                    f" (the sandbox: {fetched['plans'] / max(generating, 0.01):,.0f}),"
                    f" {fetched['paused']:.1f} s resting"
                    f"  [load {_load()}]",
                    flush=True,
                )
                for processes in args.processes:
                    run = fetched if processes == args.processes[0] else None
                    if run is None:  # a fresh run of the same snapshot for each figure
                        name = f"p{processes}"
                        await _provider(url, schema, name, f"{sandbox.base_url}/feeds/{name}")
                        run = fetch_once(schema, f"p{processes}", sandbox.base_url, plans)
                    rate, paused = process_with(schema, run["run_id"], processes, args.batch)
                    print(
                        f"process {plans:>9,} plans with {processes} process(es): "
                        f"{rate:>9,.0f} plans/s, {paused:.1f} s resting  [load {_load()}]",
                        flush=True,
                    )
                if args.search_seconds > 0:
                    await _search_figures(args, url, schema, sandbox.base_url, plans)
            finally:
                await _drop_schema(url, schema)


async def _search_figures(
    args: argparse.Namespace, url: str, schema: str, base: str, plans: int
) -> None:
    idle: dict[int, float] = {}
    for concurrency in args.concurrency:
        p50, p99, rps, refused = await search_load(url, schema, concurrency, args.search_seconds)
        idle[concurrency] = p99
        print(
            f"search idle,      {concurrency:>2} callers ({plans:,} plans): p50 {p50:6.1f} ms  "
            f"p99 {p99:6.1f} ms  {rps:8,.0f} req/s  refused {refused}  [load {_load()}]",
            flush=True,
        )
    await _provider(url, schema, "busy", f"{base}/feeds/busy")
    # Ingestions of the same size (fetch, then 2 processing processes) run one after
    # another in other processes for as long as the rounds take: every round is measured
    # while one runs, and a 1M-plan ingestion need not be repeated for each round.
    ingesting = _Ingesting(schema, f"{base}/feeds/busy?plans={plans}&zones=3&seed=9", args.batch)
    background = asyncio.create_task(ingesting.run())
    ratios: list[str] = []
    try:
        # Each round starts in the phase it is for (fetching: the parser, COPY and the
        # provider; processing: the upserts), so both are measured at any size.
        for phase in args.ingesting_phases:
            for concurrency in args.concurrency:
                await ingesting.reach(phase, background)
                p50, p99, rps, refused = await search_load(
                    url, schema, concurrency, args.search_seconds
                )
                ratios.append(f"{phase} {concurrency} callers {p99 / idle[concurrency]:.2f}x")
                print(
                    f"search ingesting, {concurrency:>2} callers ({plans:,} plans): "
                    f"p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  {rps:8,.0f} req/s  refused {refused}"
                    f"  [load {_load()}, started {phase}, ended in {ingesting.phase}]",
                    flush=True,
                )
    finally:
        await ingesting.stop(background)
    print(f"p99 ingesting / idle ({plans:,} plans): {', '.join(ratios)} (aim: at most 2x)")
    print(f"ingestion while searched ({plans:,} plans): {ingesting.summary()}", flush=True)


class _Ingesting:
    """Ingestions in child processes, one after another, until :meth:`stop`.

    Keeps what each finished phase did (plans, seconds, seconds rested by its pacer):
    the ingestion's own rate while searches run, the price of yielding to them.
    """

    def __init__(self, schema: str, feed: str, batch: int) -> None:
        self.schema, self.feed, self.batch = schema, feed, batch
        self.phase = "starting"
        self._changed = asyncio.Event()
        self._children: list[subprocess.Popen[str]] = []
        self._stopped = False
        self.fetched: list[dict[str, Any]] = []
        self.processed: list[dict[str, Any]] = []

    async def run(self) -> None:
        cycle = 0
        while not self._stopped:
            cycle += 1
            self._enter(f"ingestion {cycle} fetching")
            self._children = [_spawn("fetch", self.schema, "busy", self.feed)]
            results = await self._wait()
            if results is None:
                return
            self.fetched.append(results[0])
            run_id = int(results[0].get("run_id", 0))
            self._enter(f"ingestion {cycle} processing")
            started = time.monotonic()
            self._children = [
                _spawn("process", self.schema, str(run_id), str(self.batch)) for _ in range(2)
            ]
            results = await self._wait()
            if results is None:
                return
            self.processed.append(
                {
                    "done": sum(int(r["done"]) for r in results),
                    "seconds": time.monotonic() - started,
                    "paused": max(float(r.get("paused", 0)) for r in results),
                }
            )

    def summary(self) -> str:
        def rate(phases: list[dict[str, Any]], key: str) -> str:
            if not phases:
                return "none finished"
            done = sum(int(p[key]) for p in phases)
            seconds = sum(float(p["seconds"]) for p in phases)
            paused = sum(float(p.get("paused", 0)) for p in phases)
            return (
                f"{done / seconds:,.0f} plans/s over {len(phases)} run(s), {seconds:.1f} s, "
                f"{paused:.1f} s of it resting"
            )

        return (
            f"fetch+stage {rate(self.fetched, 'plans')}; "
            f"processing (2 processes) {rate(self.processed, 'done')}"
        )

    def _enter(self, phase: str) -> None:
        self.phase = phase
        self._changed.set()
        self._changed = asyncio.Event()

    async def reach(self, phase: str, task: asyncio.Task[None]) -> None:
        """Return once an ingestion is in ``phase`` (fetching or processing)."""
        while not self.phase.endswith(phase):
            changed = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait({changed, task}, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            if task.done():
                task.result()  # an ingesting child failed: raise its error
                raise SystemExit("the ingestions ended before the rounds")

    async def _wait(self) -> list[dict[str, Any]] | None:
        """The children's results (None once stopped); a child failing ends the benchmark."""
        outs = [await asyncio.to_thread(child.communicate) for child in self._children]
        if self._stopped:
            return None
        for child, (out, _) in zip(self._children, outs, strict=True):
            if child.returncode != 0:
                raise SystemExit(f"an ingesting child failed ({child.returncode}): {out}")
        return [dict(json.loads(out.strip().splitlines()[-1])) for out, _ in outs]

    async def stop(self, task: asyncio.Task[None]) -> None:
        self._stopped = True
        for child in self._children:
            if child.poll() is None:
                child.terminate()
        await task


def _child(argv: list[str]) -> None:
    what, schema, *rest = argv
    if what == "fetch":
        print(json.dumps(asyncio.run(child_fetch(schema, rest[0], rest[1]))))
    else:
        print(json.dumps(asyncio.run(child_process(schema, int(rest[0]), int(rest[1])))))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--search-seconds", type=float, default=10.0)
    parser.add_argument("--provider-nice", type=int, default=10, choices=range(20))
    parser.add_argument(
        "--ingesting-phases",
        nargs="+",
        choices=["fetching", "processing"],
        default=["fetching", "processing"],
        help="the ingestion phases the ingesting rounds are measured in",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
