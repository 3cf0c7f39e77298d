"""Herald, PgQueuer and a bare-SQL loop side by side at the concurrency users run.

Run from the repository root, with the ``peers`` extra installed (for PgQueuer)::

    HERALD_DATABASE_URL=postgresql://user@host/db python -m benchmarks.bench_compare
    HERALD_DATABASE_URL=... python -m benchmarks.bench_compare --concurrency 16,200 --jobs 20000

For each concurrency C it drains the same number of no-op jobs, each recording its
completion, three ways, one process each, durable commits:

* **Herald**: one ``herald worker --concurrency C`` process (bench_core's drain figure);
* **PgQueuer**: one ``pgq run --max-concurrent-tasks C --batch-size C/2`` process
  (bench_pgqueuer's drain figure; PgQueuer refuses a batch above half its task cap);
* **bare SQL**: no library at all. A loop claims a batch of C rows of Herald's own jobs
  table with one ``FOR UPDATE SKIP LOCKED`` statement that sets the lease and the fence
  in the same update, commits, then completes the batch with one statement fenced by
  (id, fence) and commits. Measured with one such loop (one connection) and two.

The bare loop is the ceiling a queue library can approach at that batch size: it does
the two writes every job needs and nothing else. Rates are taken on the database clock
(first claim to last completion), as in bench_core. The ratios printed at the end are
Herald's rate over each other's.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from benchmarks import bench_core, bench_pgqueuer
from benchmarks.bench_app import app
from herald import loop
from herald.client import Client, JobSpec
from herald.config import Settings
from herald.db import connect, conninfo

# The bare loop's two statements: what any SKIP LOCKED queue must do per batch. The
# claim names the queue, so it reads the claim index in order (queue, priority, run_at,
# id) and stops after `limit` rows, as Herald's does; without it every claim would sort
# the whole backlog.
_BARE_CLAIM = """
WITH next AS (
    SELECT id FROM jobs
    WHERE state = 'waiting' AND queue = 'bench' AND run_at <= now()
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j
SET state = 'running', attempt = j.attempt + 1, fence = j.fence + 1,
    lease_owner = %(owner)s, lease_expires_at = now() + interval '30 seconds',
    attempted_at = now()
FROM next WHERE j.id = next.id
RETURNING j.id, j.fence
"""
_BARE_COMPLETE = """
UPDATE jobs j
SET state = 'succeeded', finished_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    result = '{"ok": true}'
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS done(id, fence)
WHERE j.id = done.id AND j.fence = done.fence AND j.state = 'running'
"""


async def bench_bare(url: str, jobs: int, concurrency: int, connections: int) -> float:
    """Jobs/s drained by ``connections`` bare claim/complete loops, batches of C."""
    async with bench_core.fresh_schema(url) as settings:
        async with await Client.open(app, settings) as client:
            for i in range(0, jobs, 5000):
                chunk = [JobSpec("bench.noop", {"n": i + j}) for j in range(min(5000, jobs - i))]
                await client.enqueue_many(chunk)
        await asyncio.gather(*(_bare_loop(settings, concurrency) for _ in range(connections)))
        span = await _span(settings)
        if span[0] != jobs:
            raise RuntimeError(f"expected {jobs} succeeded jobs, found {span[0]}")
        return jobs / span[1]


async def _bare_loop(settings: Settings, concurrency: int) -> None:
    owner = f"bare-{uuid.uuid4().hex[:8]}"
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        while True:
            cur = await conn.execute(_BARE_CLAIM, {"limit": concurrency, "owner": owner})
            rows = await cur.fetchall()
            if not rows:
                return
            await conn.execute(
                _BARE_COMPLETE,
                {"ids": [r["id"] for r in rows], "fences": [r["fence"] for r in rows]},
            )


async def _span(settings: Settings) -> tuple[int, float]:
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        cur = await conn.execute(bench_core._DRAIN_SPAN)
        row = await cur.fetchone()
    assert row is not None
    return int(row["ok"]), float(row["span_s"])


async def interleaved(
    runs: int, measures: dict[str, Callable[[], Awaitable[float]]]
) -> dict[str, list[float]]:
    """Each measure ``runs`` times, taken in turn (A, B, C, A, B, C...): on a machine whose
    load drifts, every system sees the same stretches of it."""
    values: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(runs):
        for name, measure in measures.items():
            values[name].append(await measure())
    return values


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min)"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--concurrency", default="16,200", help="comma-separated levels")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs drained per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best, median)")
    parser.add_argument(
        "--systems", default="herald,pgqueuer,bare", help="which of herald,pgqueuer,bare"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of Herald, measured in turn with this one (before/after)",
    )
    parser.add_argument(
        "--latency", action="store_true", help="also enqueue-to-start latency of an idle worker"
    )
    args = parser.parse_args(argv)
    url = os.environ.get("HERALD_DATABASE_URL")
    if not url:
        parser.error("set HERALD_DATABASE_URL to the PostgreSQL server to measure against")
    levels = [int(c) for c in args.concurrency.split(",") if c]
    systems = {s.strip() for s in args.systems.split(",") if s.strip()}
    unknown = systems - {"herald", "pgqueuer", "bare"}
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.baseline is not None and not (args.baseline / "src" / "herald").is_dir():
        parser.error(f"--baseline {args.baseline}: no src/herald there")
    print(f"machine:  {bench_core.machine()}")
    print(f"jobs per run: {args.jobs:,}; runs per figure: {args.repeat} (best / median)\n")

    for c in levels:
        measures: dict[str, Callable[[], Awaitable[float]]] = {}
        if "herald" in systems:
            drain = bench_core.bench_drain
            measures["Herald"] = functools.partial(drain, url, args.jobs, 1, c, None)
            if args.baseline is not None:
                measures["Herald (baseline)"] = functools.partial(
                    bench_core.bench_drain, url, args.jobs, 1, c, None, args.baseline
                )
        if "pgqueuer" in systems:
            # PgQueuer refuses a task cap below twice its batch: it claims C/2 at a time.
            pgq = ["--batch-size", str(max(1, c // 2)), "--max-concurrent-tasks", str(c)]
            measures["PgQueuer"] = functools.partial(
                bench_pgqueuer.bench_drain, url, args.jobs, 1, pgq
            )
        if "bare" in systems:
            for n in (1, 2):
                measures[f"bare SQL ({n} conn.)"] = functools.partial(
                    bench_bare, url, args.jobs, c, n
                )
        before = load()
        values = await interleaved(args.repeat, measures)
        print(f"concurrency {c} ({before} before, {load()} after)")
        for name, runs in values.items():
            shown = ", ".join(f"{v:,.0f}" for v in runs)
            print(
                f"  {name:<22} best {max(runs):>9,.0f} jobs/s   median "
                f"{statistics.median(runs):>9,.0f} jobs/s   (runs: {shown})"
            )
        if "Herald" in values:
            herald = max(values["Herald"])
            for name, runs in values.items():
                if name != "Herald":
                    print(f"  Herald / {name:<22} {herald / max(runs):>6.2f}x")
        print(flush=True)
    if args.latency and "herald" in systems:
        await latency(url, args.baseline, args.repeat)
    return 0


async def latency(url: str, baseline: Path | None, runs: int) -> None:
    """Enqueue-to-start latency of an idle worker (bench_core's), in turn with the baseline."""
    sources = {"Herald": None, **({"Herald (baseline)": baseline} if baseline else {})}
    for _ in range(runs):
        for name, source in sources.items():
            lat, _ = await bench_core.bench_latency(url, 300, 0.02, source)
            p50, p99 = bench_core.percentile(lat, 50), bench_core.percentile(lat, 99)
            print(f"  latency {name:<20} p50 {p50:.2f} ms  p99 {p99:.2f} ms  ({load()})")


if __name__ == "__main__":
    raise SystemExit(loop.run(main(), Settings.from_env().event_loop))
