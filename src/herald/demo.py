"""``herald demo``: the engine end to end on the embedded database, then a summary.

It admits a batch of jobs (bulk), shows that a second trigger for the same object is
"already in progress", runs a two-step pipeline that fails once and resumes at its
unfinished step, and dead-letters a job that can never succeed.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from herald import tables
from herald.backoff import Backoff
from herald.client import Client, JobSpec, open_connection
from herald.config import Settings
from herald.context import JobContext
from herald.errors import Permanent
from herald.migrate import migrate
from herald.registry import Herald
from herald.worker import Worker

app = Herald()
_QUICK = Backoff(base=0.2, factor=2.0, cap=2.0)


@app.task("demo.render", queue="demo", backoff=_QUICK)
async def render(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(random.uniform(0, 0.002))
    return {"rendered": payload["n"] * 2}


publish = app.pipeline(
    "demo.publish",
    steps=["get_data", "persist_data"],
    queue="demo",
    backoff=_QUICK,
    keep_forever=True,
)


@publish.step("get_data")
async def get_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(0.05)
    return {
        "files": [f"{payload['dataset']}/v{ctx.version}/data.{ext}" for ext in ("json", "csv")],
        "exported_on_attempt": ctx.attempt,
    }


@publish.step("persist_data")
async def persist_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    if ctx.attempt == 1:
        raise ConnectionError("catalog unreachable (simulated): retried from persist_data")
    return {"published": ctx.checkpoint["files"], "persisted_on_attempt": ctx.attempt}


@app.task("demo.broken", queue="demo", max_attempts=3)
async def broken(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise Permanent("the target rejected this request (simulated): dead at once")


async def run_demo(settings: Settings, jobs: int = 2000) -> int:
    print(
        "Herald demo: booting the database" + (" (embedded)" if not settings.database_url else "")
    )
    conn = await open_connection(settings)
    async with conn:
        applied = await migrate(conn, settings.schema)
    print(f"  schema {settings.schema!r} ready ({len(applied)} migrations applied)")
    async with await Client.open(app, settings) as client:
        started = time.perf_counter()
        admitted = await client.enqueue_many(
            [JobSpec("demo.render", {"n": i}) for i in range(jobs)]
        )
        took = time.perf_counter() - started
        print(f"  admitted {len(admitted)} jobs in one round trip ({took * 1000:.0f} ms)")
        first = await client.enqueue("demo.publish", {"dataset": "air-quality"}, key="air-quality")
        second = await client.enqueue("demo.publish", {"dataset": "air-quality"}, key="air-quality")
        print(
            f"  publish air-quality: job {first.id} v{first.version} {first.outcome.value}; "
            f"second trigger -> job {second.id} {second.outcome.value}"
        )
        dead = await client.enqueue("demo.broken", {"reason": "demo"})

        worker = Worker(app, queues=["demo"], concurrency=50, settings=settings)
        runner = asyncio.create_task(worker.run())
        watched = [a.id for a in admitted] + [first.id, dead.id]
        started = time.perf_counter()
        while True:
            counts = await client.state_counts()
            active = counts.get("waiting", 0) + counts.get("running", 0)
            finished = sum(counts.values()) - active
            print(f"\r  working: {finished}/{sum(counts.values())} finished", end="", flush=True)
            if active == 0:
                break
            if time.perf_counter() - started > 120:
                print("\n  gave up waiting after 120 s", flush=True)
                break
            await asyncio.sleep(0.2)
        print(f"\n  drained in {time.perf_counter() - started:.2f} s")
        worker.stop()
        await runner

        print("\nJobs by state")
        counts = await client.state_counts()
        print(tables.table([{"state": k, "jobs": v} for k, v in counts.items()], ["state", "jobs"]))
        job = await client.get_job(first.id)
        assert job is not None
        print(
            f"\nPipeline job {first.id} (version {job['version']}): state {job['state']}, "
            f"attempt {job['attempt']}, step {job['step']}"
        )
        print(f"  checkpoint: {job['checkpoint']}")
        print(f"  result:     {job['result']}")
        if job["errors"]:
            print(f"  error seen: {job['errors'][-1]['message']}")
        print("\nDead letters")
        print(
            tables.table(
                await client.list_dead(limit=5),
                ["job_id", "kind", "attempt", "reason", "last_error"],
            )
        )
        del watched
    return 0
