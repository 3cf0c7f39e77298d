"""Prometheus metrics: durable figures from the database, in-process ones from a worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from herald import Worker
from herald.api import ApiSettings, create_app
from herald.client import Client, open_connection
from herald.config import Settings
from herald.metrics import HeraldMetrics
from herald.states import ACTIVE_JOB_STATES
from tests.eventually import eventually
from tests.support import APP

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def _drained(client: Client, queue: str, deadline: float = 60.0) -> None:
    async def probe() -> bool:
        rows = await client.list_jobs(queue=queue, limit=1000)
        return all(r.state not in ACTIVE_JOB_STATES for r in rows)

    await eventually(probe, what=f"the jobs of queue {queue} to finish", within=deadline)


@pytest.fixture
async def scrape(settings: Settings) -> AsyncIterator[tuple[HeraldMetrics, httpx.AsyncClient]]:
    metrics = HeraldMetrics()
    app = create_app(APP, settings, ApiSettings(auth=False), metrics=metrics)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        yield metrics, http


async def test_metrics_report_database_and_worker_figures(
    settings: Settings, client: Client, scrape: tuple[HeraldMetrics, httpx.AsyncClient]
) -> None:
    metrics, http = scrape
    for n in range(3):
        r = await http.post("/v1/jobs", json={"kind": "echo", "payload": {"n": n}})
        assert r.status_code == 202
    await client.enqueue("permanent")
    await client.enqueue("snoozer", {"times": 1})
    await client.enqueue("noop", queue="later", run_at=None)
    worker = Worker(APP, settings=settings, concurrency=4, maintenance=False, queues=["default"])
    metrics.watch_worker(worker)
    running = asyncio.create_task(worker.run())
    try:
        async with await open_connection(settings) as conn:
            await conn.execute(
                "UPDATE jobs SET run_at = herald_now() - interval '90 seconds'"
                " WHERE queue = 'later'"
            )
        await _drained(client, "default")
    finally:
        worker.stop()
        await running

    async with await open_connection(settings) as conn:
        await conn.execute(
            "INSERT INTO stale_writes (job_id, fence, operation, owner)"
            " VALUES (1, 1, 'finish', 'w')"
        )
        await conn.execute(
            "INSERT INTO rescues (job_id, fence, owner, outcome) VALUES (1, 1, 'w', 'waiting')"
        )
        await conn.execute(
            "INSERT INTO schedules (kind, key, frequency, timezone, at_time, next_due_at)"
            " VALUES ('noop', 'daily-report', 'daily', 'UTC', '06:00',"
            "         herald_now() - interval '1 hour')"
        )
        await conn.execute(
            "INSERT INTO rate_limits (key, rate, burst, tokens, granted, denied)"
            " VALUES ('partner-api', 5, 5, 0, 12, 4)"
        )
    r = await http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = parse(r.text)

    assert value(samples, "herald_database_up") == 1
    assert value(samples, "herald_jobs", kind="echo", state="succeeded") == 3
    assert value(samples, "herald_jobs", kind="permanent", state="dead") == 1
    assert value(samples, "herald_jobs", kind="noop", state="waiting") == 1
    assert value(samples, "herald_job_snoozes", kind="snoozer") == 1
    assert value(samples, "herald_dead_letters", kind="permanent", reason="permanent") == 1
    assert value(samples, "herald_stale_writes_rejected", operation="finish") == 1
    assert value(samples, "herald_rescues", outcome="waiting") == 1
    assert value(samples, "herald_queue_depth", queue="later") == 1
    assert value(samples, "herald_queue_oldest_waiting_seconds", queue="later") >= 90
    assert value(samples, "herald_queue_running", queue="later") == 0
    assert value(samples, "herald_schedule_lag_seconds", kind="noop") >= 3600
    assert value(samples, "herald_schedules", kind="noop", paused="false") == 1
    assert value(samples, "herald_api_enqueued_total", kind="echo", outcome="created") == 3
    # The dead letter's compensation is owed until a cleanup runner settles it.
    assert value(samples, "herald_cleanup_backlog", kind="permanent") == 1
    assert value(samples, "herald_cleanup_oldest_pending_seconds") >= 0
    assert value(samples, "herald_rate_limit_waits", key="partner-api") == 4
    assert value(samples, "herald_rate_limit_grants", key="partner-api") == 12

    owner = worker.owner
    assert value(samples, "herald_worker_claimed_total", worker=owner) == 6  # snoozer twice
    assert value(samples, "herald_worker_succeeded_total", worker=owner) == 4
    assert value(samples, "herald_worker_dead_total", worker=owner) == 1
    assert value(samples, "herald_worker_snoozed_total", worker=owner) == 1
    duration = "herald_handler_duration_seconds_count"
    assert value(samples, duration, kind="echo", outcome="succeeded") == 3
    assert value(samples, duration, kind="permanent", outcome="dead") == 1
    assert value(samples, duration, kind="snoozer", outcome="snooze") == 1


async def test_unreachable_database_is_reported_not_raised(settings: Settings) -> None:
    metrics = HeraldMetrics()
    client = await Client.open(APP, settings)
    await client.close()
    snap = await metrics.refresh(client.pool)
    assert not snap.up
    samples = parse(metrics.render().decode())
    assert value(samples, "herald_database_up") == 0
    assert not any(name == "herald_jobs" for name, _ in samples)
