"""Proofs against real servers: a partial fetch never becomes data, hostile documents
fail their run without touching the network, a saturated search answers 503 not 500."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from herald.api import create_app
from herald.api.state import ApiSettings
from herald.client import Client
from herald.config import Settings
from herald.ingest.processing import drain_run
from herald.ingest.providers import request_fetch
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec, expected_snapshot
from tests.ingest.harness import (
    add_provider,
    canonical,
    ingest_app,
    open_conn,
    running_worker,
    stage_snapshot,
    wait_for_job,
)

SPEC = SnapshotSpec(seed=21, plans=12_000, zones=3)


@pytest.mark.slow
async def test_a_fetch_cut_off_halfway_fails_its_run_and_the_next_fetch_publishes_all(
    settings: Settings,
) -> None:
    app = ingest_app(settings)
    async with (
        Sandbox({"acme": FeedConfig(spec=SPEC)}) as sandbox,
        await Client.open(app, settings) as client,
        await open_conn(settings) as conn,
        running_worker(app, settings),
    ):
        # The connection drops after ~60 % of the body: batches were already staged.
        await add_provider(conn, "acme", sandbox.feed_url("acme", version=1, drop_after=3_000_000))
        cut = await wait_for_job(client, (await request_fetch(client, "acme")).id)
        failed = cut["result"]
        assert failed["state"] == "failed" and "incomplete" in failed["error"]
        cur = await conn.execute(
            "SELECT state, rows_staged FROM ingest_runs WHERE id = %s", (failed["run_id"],)
        )
        run = await cur.fetchone()
        assert run is not None and run["state"] == "failed" and run["rows_staged"] >= 5000
        cur = await conn.execute(
            "SELECT count(*) AS n FROM ingest_staged WHERE run_id = %s AND state <> 'pending'",
            (failed["run_id"],),
        )
        assert (await cur.fetchone() or {})["n"] == 0  # never claimed, never processed
        assert await canonical(conn, "acme") == {}
        await add_provider(conn, "acme", sandbox.feed_url("acme", version=1))
        whole = await wait_for_job(client, (await request_fetch(client, "acme")).id)
        assert whole["result"]["state"] == "staged"
        for _ in range(600):
            cur = await conn.execute(
                "SELECT state FROM ingest_runs WHERE id = %s", (whole["result"]["run_id"],)
            )
            if (await cur.fetchone() or {})["state"] == "processed":
                break
            await asyncio.sleep(0.05)
        assert set(await canonical(conn, "acme")) == set(expected_snapshot(SPEC, 1))
        cur = await conn.execute(
            "SELECT state FROM ingest_staged WHERE run_id = %s GROUP BY state", (failed["run_id"],)
        )
        assert [r["state"] for r in await cur.fetchall()] == ["pending"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["xxe-file", "xxe-net", "external-dtd", "billion-laughs", "deep-nesting", "not-xml"]
)
async def test_hostile_documents_fail_their_run_without_network_access(
    settings: Settings, kind: str
) -> None:
    app = ingest_app(settings)
    async with (
        Sandbox() as sandbox,
        await Client.open(app, settings) as client,
        await open_conn(settings) as conn,
        running_worker(app, settings),
    ):
        await add_provider(conn, "evil", sandbox.feed_url("evil", hostile=kind))
        job = await wait_for_job(client, (await request_fetch(client, "evil")).id)
        assert job["result"]["state"] == "failed", job
        assert sandbox.canary_hits == 0
        assert await canonical(conn, "evil") == {}
        cur = await conn.execute("SELECT error FROM ingest_runs")
        assert (await cur.fetchone() or {})["error"]


@pytest.fixture
async def api_with_plans(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("HERALD_SEARCH_CONCURRENCY", "4")
    monkeypatch.setenv("HERALD_SEARCH_TIMEOUT_MS", "3000")
    herald = ingest_app(settings)
    app = create_app(herald, settings, ApiSettings(auth=False))
    async with await open_conn(settings) as conn:
        await add_provider(conn, "acme", "http://127.0.0.1:9/")
        await drain_run(
            conn, await stage_snapshot(conn, "acme", SnapshotSpec(plans=300), 1), "w", poll=0.01
        )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://h.test") as http,
    ):
        yield http


async def test_a_saturated_search_answers_503_at_once_never_500_and_recovers(
    settings: Settings, api_with_plans: httpx.AsyncClient
) -> None:
    http = api_with_plans
    # A lock holds every search in the database: the four bulkhead slots fill up.
    async with await open_conn(settings) as blocker:
        async with blocker.transaction():
            await blocker.execute("LOCK TABLE ingest_plans IN ACCESS EXCLUSIVE MODE")

            async def one(i: int) -> tuple[int, float, httpx.Response]:
                started = time.monotonic()
                params = {"starts_at": "2026-01-01", "ends_at": f"2027-01-{1 + i % 28:02d}"}
                answer = await http.get("/search", params=params)
                return answer.status_code, time.monotonic() - started, answer

            answers = await asyncio.gather(*(one(i) for i in range(40)))
        statuses = [status for status, _, _ in answers]
        assert 500 not in statuses and set(statuses) == {503}
        saturated = [(t, a) for _, t, a in answers if a.json()["type"].endswith("saturated")]
        timed_out = [(t, a) for _, t, a in answers if a.json()["type"].endswith("unavailable")]
        assert len(saturated) + len(timed_out) == 40
        # Four held the slots until the statement timeout freed them (503, not 500);
        # the others were refused without waiting for a slot, a connection or a query.
        assert len(timed_out) >= 4 and len(saturated) >= 28
        assert all(t < 3.0 and a.headers["Retry-After"] == "1" for t, a in saturated)
        assert all(t >= 2.9 for t, _ in timed_out)
    recovered = await http.get(
        "/search", params={"starts_at": "2026-01-01", "ends_at": "2028-01-01"}
    )
    assert recovered.status_code == 200 and recovered.json()["items"]
