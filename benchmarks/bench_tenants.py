"""Tenant fairness: how long tenant B's jobs wait to start while tenant A floods.

Run from the repository root::

    HERALD_DATABASE_URL=postgresql://user@host/db .venv/bin/python -m benchmarks.bench_tenants

One worker (in this process, ``--concurrency`` handlers, each job sleeping ``--work-ms``)
drains one queue. Tenant A enqueues a backlog of ``--flood`` jobs up front; then tenant
B enqueues ``--samples`` jobs, one every ``--every-ms``, into the same queue. Each of B's
handlers records when it started (the host's monotonic clock, read just before the
enqueue too), so the figure is B's enqueue-to-start latency. Three runs, side by side:

* **B alone**: no flood, the floor;
* **B beside A's flood**: B is another tenant (the claim lets tenants take turns);
* **same tenant as the flood**: B's jobs in A's tenant, i.e. what a shared queue without
  tenants gives: they wait behind the backlog in claim order.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from benchmarks.bench_core import fresh_schema
from herald import loop, tenancy
from herald.client import Client, JobSpec
from herald.config import Settings
from herald.context import JobContext
from herald.db import database_url
from herald.ops import tenants
from herald.registry import Herald
from herald.worker import Worker

app = Herald()
WORK_SECONDS = 0.002


@app.task("bench.work", queue="shared")
async def work(ctx: JobContext, payload: dict[str, Any]) -> None:
    await asyncio.sleep(WORK_SECONDS)


@app.task("bench.stamp", queue="shared")
async def stamp(ctx: JobContext, payload: dict[str, Any]) -> dict[str, float]:
    return {"started": time.monotonic()}


async def _one(url: str, args: argparse.Namespace, flood: int, b_tenant: str) -> list[float]:
    """B's latencies (seconds) with ``flood`` of A's jobs ahead, B acting as ``b_tenant``."""
    async with fresh_schema(url) as settings:
        settings = settings.with_(poll_interval=0.05)
        async with await Client.open(app, settings) as client:
            for name in ("tenant-a", "tenant-b"):
                spec = tenants.TenantSpec(name)
                await tenants.create(client.pool, spec, actor="bench", reason="benchmark")
            with tenancy.acting_as("tenant-a"):
                for start in range(0, flood, 5000):
                    batch = [JobSpec("bench.work", {}) for _ in range(min(5000, flood - start))]
                    await client.enqueue_many(batch)
            worker = Worker(app, settings=settings, concurrency=args.concurrency)
            running = asyncio.create_task(worker.run())
            await asyncio.wait_for(worker.ready.wait(), 30)
            sent: dict[int, float] = {}
            with tenancy.acting_as(b_tenant):
                for _ in range(args.samples):
                    sent_at = time.monotonic()
                    sent[(await client.enqueue("bench.stamp", {})).id] = sent_at
                    await asyncio.sleep(args.every_ms / 1000)
                latencies = await _collect(client, sent)
            worker.stop()
            await running
    return latencies


async def _collect(client: Client, sent: dict[int, float]) -> list[float]:
    found: dict[int, float] = {}
    deadline = time.monotonic() + 600
    while len(found) < len(sent) and time.monotonic() < deadline:
        for job_id in set(sent) - set(found):
            row = await client.get_job(job_id)
            if row is not None and row.state == "succeeded":
                found[job_id] = row.result["started"] - sent[job_id]
        await asyncio.sleep(0.2)
    return sorted(found.values())


def _summary(label: str, latencies: list[float]) -> str:
    if not latencies:
        return f"{label:<32} no job started"
    p95 = latencies[max(0, round(len(latencies) * 0.95) - 1)]
    return (
        f"{label:<32} n={len(latencies):<4} p50 {statistics.median(latencies) * 1000:8.1f} ms"
        f"  p95 {p95 * 1000:8.1f} ms  max {latencies[-1] * 1000:8.1f} ms"
    )


async def _main(args: argparse.Namespace) -> None:
    global WORK_SECONDS
    WORK_SECONDS = args.work_ms / 1000
    url = database_url(Settings.from_env())
    print(
        f"flood {args.flood} jobs of {args.work_ms} ms, concurrency {args.concurrency}, "
        f"B: {args.samples} jobs every {args.every_ms} ms"
    )
    runs = (
        ("B alone", 0, "tenant-b"),
        ("B beside A's flood", args.flood, "tenant-b"),
        ("same tenant as the flood", args.flood, "tenant-a"),
    )
    for label, flood, tenant in runs:
        print(_summary(label, await _one(url, args, flood, tenant)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=20_000, help="tenant A's backlog")
    parser.add_argument("--samples", type=int, default=50, help="tenant B's jobs")
    parser.add_argument("--every-ms", type=float, default=50.0, help="between B's jobs")
    parser.add_argument("--work-ms", type=float, default=2.0, help="each job's handler time")
    parser.add_argument("--concurrency", type=int, default=50, help="handlers at once")
    loop.run(_main(parser.parse_args()), Settings.from_env().event_loop)


if __name__ == "__main__":
    main()
