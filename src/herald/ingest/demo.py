"""``herald ingest demo``: sandbox -> fetch -> staging -> processing -> search, end to end.

Runs on the embedded PostgreSQL unless ``HERALD_DATABASE_URL`` names a server: starts
the provider sandbox on loopback, registers it as a provider, fetches one snapshot,
processes it with the worker here (several ``ingest.process`` jobs sharing the run) and
prints the first page of a search answered by the API's own route.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

import httpx

from herald.api.state import ApiSettings
from herald.client import Client, open_connection
from herald.config import Settings
from herald.ingest.inspect import RunDetail, run_detail
from herald.ingest.jobs import IngestConfig, register_ingest
from herald.ingest.pacing import PacingConfig
from herald.ingest.providers import ProviderSpec, request_fetch, save_provider
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec
from herald.migrate import migrate
from herald.ops.audit import Note
from herald.ops.housekeeping import Housekeeper
from herald.registry import Herald
from herald.states import ACTIVE_JOB_STATES
from herald.worker import Worker

PROVIDER = "demo-events"
_TIMEOUT = 600.0


async def run_demo(settings: Settings, plans: int = 50_000) -> int:
    if plans < 1:
        print("error: --plans must be at least 1", file=sys.stderr)
        return 2
    started = time.monotonic()
    where = "embedded" if not settings.database_url else "configured"
    print(f"Herald ingestion demo: {where} PostgreSQL, schema {settings.schema!r}")
    logging.getLogger("herald").setLevel(logging.WARNING)
    async with await open_connection(settings) as conn:
        await migrate(conn, settings.schema)
    app = Herald()
    # One process that also answers the search at the end: its priority stays as it is.
    config = IngestConfig(processors=4, batch=2000, duty_every=1.0, pacing=PacingConfig(nice=0))
    register_ingest(app, settings, config)
    spec = SnapshotSpec(seed=7, plans=plans, zones=3, plans_per_base=2, malformed_every=5_000)
    async with Sandbox({PROVIDER: FeedConfig(spec=spec)}) as sandbox:
        url = sandbox.feed_url(PROVIDER)
        print(f"  provider sandbox at {sandbox.base_url} ({plans:,} plans, 3 zones each)")
        async with await Client.open(app, settings) as client:
            async with client.pool.connection() as conn:
                await save_provider(
                    conn, ProviderSpec(name=PROVIDER, url=url), note=Note("demo", "demo run")
                )
            admitted = await request_fetch(client, PROVIDER)
            print(f"  fetch: job {admitted.id}")
            run = await _run_until_processed(app, settings, client, admitted.id)
            if run is None or run.state != "processed":
                print(f"error: the run did not finish: {run}", file=sys.stderr)
                return 1
            print(
                f"  run {run.id}: {run.rows_staged:,} rows staged, {run.rejected} "
                f"malformed records quarantined, {run.rows_done:,} processed, "
                f"{run.rows_failed} failed"
            )
    page = await _search(app, settings)
    print("\nGET /search?starts_at=2026-03-01T00:00:00Z&ends_at=2026-03-02T23:59:59Z&limit=5")
    for item in page["items"]:
        print(
            f"  {item['id']:<28} {item['start_date']} {item['start_time']}-{item['end_time']}  "
            f"{item['min_price']:>7}-{item['max_price']:<7} {item['title']}"
        )
    print(f"  next_cursor: {'yes' if page['next_cursor'] else 'none'}")
    print(f"\nDone in {time.monotonic() - started:.1f} s.")
    return 0


async def _run_until_processed(
    app: Herald, settings: Settings, client: Client, job_id: int
) -> RunDetail | None:
    worker = Worker(app, settings=settings, concurrency=6, name="herald-ingest-demo")
    keeper = await Housekeeper.open(app, settings)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(keeper.run(stop))]
    try:
        deadline = time.monotonic() + _TIMEOUT
        while time.monotonic() < deadline:
            job = await client.get_job(job_id)
            if job is not None and job.state not in ACTIVE_JOB_STATES:
                result = job.result or {}
                if "run_id" not in result:
                    return None
                async with client.pool.connection() as conn:
                    run = await run_detail(conn, int(result["run_id"]))
                if run is None or run.state in ("processed", "failed"):
                    return run
            await asyncio.sleep(0.2)
        return None
    finally:
        worker.stop()
        stop.set()
        await asyncio.gather(*tasks)
        await keeper.close()


async def _search(app: Herald, settings: Settings) -> dict[str, Any]:
    from herald.api import create_app

    api = create_app(app, settings, ApiSettings(auth=False))
    params: dict[str, str | int] = {
        "starts_at": "2026-03-01T00:00:00Z",
        "ends_at": "2026-03-02T23:59:59Z",
        "limit": 5,
    }
    async with (
        api.router.lifespan_context(api),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://demo") as http,
    ):
        answer = await http.get("/search", params=params)
        answer.raise_for_status()
        page: dict[str, Any] = answer.json()
        return page
