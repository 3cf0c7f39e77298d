"""Live latency of generations builds while the largest backfill runs beside them.

One worker process serves both queues (``generations`` and ``generations.backfill``)
with ``--concurrency`` slots; the backfill declares a share of them (``--backfill-slots``)
and a write rate. Live runs (one partition each, one after the other) are timed on the
database clock, from the run's declaration to the coordinator's decision that
published it: first with the worker idle (baseline), then while the backfill runs. The
backfill must still be running when the last live run finishes, or the figure is
refused (it would not be "during").

    .venv/bin/python -m benchmarks.bench_generations [--backfill-partitions 120 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from psycopg import sql as psql

from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo, database_url
from herald.generations import backfill, records, sample
from herald.generations.store import ROOT_VARIABLE
from herald.migrate import migrate

LIVE_PARTITION = "2026-07-14"


@dataclass
class Figures:
    baseline_ms: list[float]
    during_ms: list[float]
    backfill_done_during: int
    backfill_total: int
    backfill_seconds: float

    @staticmethod
    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    def lines(self) -> list[str]:
        out = []
        for name, values in (("idle", self.baseline_ms), ("during backfill", self.during_ms)):
            out.append(
                f"live build latency {name:>16}: p50 {self.pct(values, 0.5):7.1f} ms  "
                f"p99 {self.pct(values, 0.99):7.1f} ms  max {max(values):7.1f} ms  "
                f"(n={len(values)}, mean {statistics.mean(values):.1f})"
            )
        out.append(
            f"backfill: {self.backfill_done_during}/{self.backfill_total} partitions done while "
            f"live runs were measured; all done after {self.backfill_seconds:.1f} s"
        )
        return out


def _orders(day: str, count: int) -> bytes:
    return "".join(
        f'{{"order_id": "o{n:06d}", "amount_cents": {n}, "currency": "EUR", '
        f'"event_time": "{day}T10:00:00Z"}}\n'
        for n in range(count)
    ).encode()


async def _latency(conn: AsyncConn, run_id: int) -> float | None:
    cur = await conn.execute(
        psql.SQL(
            "SELECT extract(epoch FROM d.decided_at - r.created_at) * 1000 AS ms "
            "FROM gen_runs r JOIN gen_decisions d ON d.run_id = r.id "
            "WHERE r.id = %s AND r.state = 'settled' ORDER BY d.id LIMIT 1"
        ),
        (run_id,),
    )
    row = await cur.fetchone()
    return None if row is None else float(row["ms"])


async def _live_runs(gens: Any, conn: AsyncConn, manifest: int, count: int) -> list[float]:
    found = []
    for _ in range(count):
        run = await records.plan_run(
            gens,
            conn,
            dataset_name="orders",
            purpose="repair",
            definition_version="v18",
            manifest_ids=[manifest],
            partitions=[LIVE_PARTITION],
            policy="rebase",
            requested_by="bench",
            reason="live",
        )
        deadline = time.monotonic() + 60
        while (ms := await _latency(conn, run.id)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"live run {run.id} did not settle")
            await asyncio.sleep(0.01)
        found.append(ms)
    return found


LAYOUTS = ("shared", "separate")


def _start_workers(
    env: dict[str, str], workdir: Path, layout: str, concurrency: int, slots: int
) -> list[tuple[subprocess.Popen[bytes], Any]]:
    """shared: one process serves both queues (the backfill holds ``slots`` of its
    ``concurrency``); separate: live work keeps a process of its own, and the backfill's
    process runs at a lower CPU priority (nice 10), its share of a busy host."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout is one of {LAYOUTS}")
    plan = (
        [("generations,generations.backfill", concurrency, 0)]
        if layout == "shared"
        else [("generations", concurrency, 0), ("generations.backfill", slots, 10)]
    )
    procs = []
    for number, (queues, slots_here, niceness) in enumerate(plan):
        log = (workdir / f"worker-{number}.log").open("wb")
        command = [
            sys.executable,
            "-m",
            "herald",
            "--app",
            "herald.generations.sample:app",
            "worker",
            "--queues",
            queues,
            "--concurrency",
            str(slots_here),
        ]
        if niceness:
            command = ["nice", "-n", str(niceness), *command]
        procs.append(
            (subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), log)
        )
    return procs


def _stop_workers(procs: list[tuple[subprocess.Popen[bytes], Any]]) -> None:
    for proc, _ in procs:
        proc.send_signal(signal.SIGTERM)
    for proc, log in procs:
        proc.wait(30)
        log.close()


async def measure(
    settings: Settings,
    workdir: Path,
    *,
    backfill_partitions: int = 120,
    rows: int = 3000,
    live_runs: int = 40,
    concurrency: int = 4,
    backfill_slots: int = 2,
    writes_per_second: float = 20.0,
    layout: str = "separate",
) -> Figures:
    url = database_url(settings)
    os.environ[ROOT_VARIABLE] = str(workdir / "store")
    gens = sample.gens
    gens.use(settings.with_(database_url=url))
    env = {
        **os.environ,
        "HERALD_DATABASE_URL": url,
        "HERALD_SCHEMA": settings.schema,
        "HERALD_POLL_INTERVAL": "0.5",
        "PYTHONUNBUFFERED": "1",
    }
    conn = await connect(conninfo(url, settings.schema))
    async with conn:
        await migrate(conn, settings.schema)
        await records.register_dataset(conn, sample.ORDERS)
        live = await records.receive_input(
            gens,
            conn,
            dataset_name="orders",
            source="shop",
            owner="team-orders",
            name="live.jsonl",
            data=_orders(LIVE_PARTITION, 200),
            schema_version=1,
            event_time_from=datetime(2026, 7, 14, tzinfo=UTC),
            event_time_to=datetime(2026, 7, 14, 23, tzinfo=UTC),
            record_count=200,
            partitions=[LIVE_PARTITION],
        )
        start = datetime(2025, 1, 1, tzinfo=UTC)
        days = [
            (start + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(backfill_partitions)
        ]
        for day in days:
            await records.receive_input(
                gens,
                conn,
                dataset_name="orders",
                source="shop",
                owner="team-orders",
                name=f"{day}.jsonl",
                data=_orders(day, rows),
                schema_version=1,
                event_time_from=datetime.fromisoformat(day).replace(tzinfo=UTC),
                event_time_to=datetime.fromisoformat(day).replace(tzinfo=UTC, hour=23),
                record_count=rows,
                partitions=[day],
            )
        procs = _start_workers(env, workdir, layout, concurrency, backfill_slots)
        try:
            await _live_runs(gens, conn, live.id, 3)  # warm up
            baseline = await _live_runs(gens, conn, live.id, live_runs)
            declared = await backfill.declare(
                gens,
                conn,
                dataset_name="orders",
                source_from=start,
                source_to=start + timedelta(days=backfill_partitions),
                definition_version="v18",
                partitions=days,
                policy="rebase",
                expected_cost={"tasks": len(days), "rows": len(days) * rows},
                writes_per_second=writes_per_second,
                concurrency=backfill_slots,
                actor="bench",
                reason="the largest backfill",
            )
            began = time.monotonic()
            during = await _live_runs(gens, conn, live.id, live_runs)
            done = (await backfill.progress(conn, declared.id))["done"]
            if done >= len(days):
                raise RuntimeError("the backfill finished before the live runs: make it larger")
            while (await backfill.progress(conn, declared.id))["done"] < len(days):  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            took = time.monotonic() - began
        finally:
            _stop_workers(procs)
    return Figures(baseline, during, done, len(days), took)


async def _main(args: argparse.Namespace) -> None:
    base = Settings.from_env()
    settings = base.with_(schema=f"bench_gen_{uuid.uuid4().hex[:8]}")
    url = database_url(base)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            figures = await measure(
                settings,
                Path(workdir),
                backfill_partitions=args.backfill_partitions,
                rows=args.rows,
                live_runs=args.live_runs,
                concurrency=args.concurrency,
                backfill_slots=args.backfill_slots,
                writes_per_second=args.writes_per_second,
                layout=args.layout,
            )
        print(
            f"layout {args.layout}: worker concurrency {args.concurrency}, "
            f"backfill share {args.backfill_slots} slots at {args.writes_per_second}/s, "
            f"{args.backfill_partitions} partitions x "
            f"{args.rows} rows"
        )
        for line in figures.lines():
            print(line)
    finally:
        conn = await connect(conninfo(url, "public"))
        async with conn:
            await conn.execute(
                psql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psql.Identifier(settings.schema)
                )
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backfill-partitions", type=int, default=120)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--live-runs", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--backfill-slots", type=int, default=2)
    parser.add_argument("--writes-per-second", type=float, default=20.0)
    parser.add_argument("--layout", choices=LAYOUTS, default="separate")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
