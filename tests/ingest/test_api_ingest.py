"""The ingestion routes and /search over the real API, a real sandbox and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.api import create_app
from herald.api.auth import create_key
from herald.api.state import ApiSettings
from herald.client import open_connection
from herald.config import Settings
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec, expected_snapshot
from herald.ops.crypto import TokenCipher
from herald.registry import Herald
from tests.ingest.harness import ingest_app, open_conn, running_worker, wait_for_run

PROBLEM = "application/problem+json"
SPEC = SnapshotSpec(seed=5, plans=400, zones=3, malformed_every=50)


@dataclass
class Api:
    http: httpx.AsyncClient
    app: FastAPI
    herald: Herald
    settings: Settings
    headers: dict[str, str]
    reader: dict[str, str]


@pytest.fixture
async def api(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    monkeypatch.setenv("HERALD_TOKEN_KEYS", TokenCipher.generate_key())
    herald = ingest_app(settings)
    app = create_app(herald, settings, ApiSettings(retry_after=7))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://h.test") as http,
    ):
        async with await open_connection(settings) as conn:
            admin = await create_key(conn, "ops", ["admin"])
            reader = await create_key(conn, "reader", ["read"])
        yield Api(
            http,
            app,
            herald,
            settings,
            {"Authorization": f"Bearer {admin.token}"},
            {"Authorization": f"Bearer {reader.token}"},
        )


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    return body


async def test_providers_fetch_runs_quarantine_and_search(api: Api) -> None:
    async with Sandbox({"acme": FeedConfig(spec=SPEC, auth="Bearer s3cret-value")}) as sandbox:
        url = sandbox.feed_url("acme")
        body = {"url": url, "auth": "Bearer s3cret-value", "reason": "onboarding"}
        created = await api.http.put("/v1/ingest/providers/acme", json=body, headers=api.headers)
        assert created.status_code == 201, created.text
        assert "s3cret" not in created.text and created.json()["has_auth"] is True
        refused = await api.http.put("/v1/ingest/providers/acme", json=body, headers=api.reader)
        assert problem(refused, 403)
        listed = await api.http.get("/v1/ingest/providers", headers=api.reader)
        assert [p["name"] for p in listed.json()] == ["acme"] and "s3cret" not in listed.text
        # An update without the auth header keeps the stored one.
        update = {"url": url, "read_timeout": 5}
        updated = await api.http.put("/v1/ingest/providers/acme", json=update, headers=api.headers)
        assert updated.status_code == 200 and updated.json()["has_auth"] is True
        async with await open_conn(api.settings) as conn:
            cur = await conn.execute("SELECT auth_cipher FROM ingest_providers")
            stored = await cur.fetchone()
            assert stored is not None and "s3cret" not in stored["auth_cipher"]
            cur = await conn.execute("SELECT action, actor FROM audit_log ORDER BY id")
            actions = [(r["action"], r["actor"]) for r in await cur.fetchall()]
            assert actions[:2] == [("register", "ops"), ("update", "ops")]

            first = await api.http.post("/v1/ingest/providers/acme/fetch", headers=api.headers)
            second = await api.http.post("/v1/ingest/providers/acme/fetch", headers=api.headers)
            assert first.status_code == second.status_code == 202
            assert second.json()["job_id"] == first.json()["job_id"]
            assert second.json()["outcome"] == "in_progress"
            async with running_worker(api.herald, api.settings):
                run = await wait_for_run(conn, None, ("processed", "failed"))
            assert run["state"] == "processed", run["error"]

    runs = (await api.http.get("/v1/ingest/runs?provider=acme", headers=api.reader)).json()
    assert [r["id"] for r in runs] == [run["id"]]
    detail = (await api.http.get(f"/v1/ingest/runs/{run['id']}", headers=api.reader)).json()
    expected = expected_snapshot(SPEC, 1)
    assert detail["rows_by_state"] == {"done": len(expected)}
    assert detail["quarantined"] == detail["rejected"] > 0
    assert problem(await api.http.get("/v1/ingest/runs/999999", headers=api.reader), 404)
    held = await api.http.get(f"/v1/ingest/quarantine?run_id={run['id']}", headers=api.reader)
    assert len(held.json()) == detail["quarantined"]
    assert all(q["reason"] and q["raw"] for q in held.json())

    # Search: every plan ever online inside the window, page by page with the cursor.
    window = {"starts_at": "2026-01-01T00:00:00", "ends_at": "2028-12-31T23:59:59Z"}
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {**window, "limit": 37}
    while True:
        page = await api.http.get("/search", params=params, headers=api.reader)
        assert page.status_code == 200, page.text
        seen += page.json()["items"]
        if page.json()["next_cursor"] is None:
            break
        params["cursor"] = page.json()["next_cursor"]
    online = {f"acme:{b}:{p}" for (b, p), plan in expected.items() if plan.online}
    assert {s["id"] for s in seen} == online and len(seen) == len(online)
    starts = [(s["start_date"], s["start_time"]) for s in seen]
    assert starts == sorted(starts)
    versioned = await api.http.get("/v1/search", params={**window, "limit": 37}, headers=api.reader)
    assert versioned.json()["items"] == seen[:37]


async def test_search_refuses_bad_input_and_unauthenticated_callers(api: Api) -> None:
    assert problem(await api.http.get("/search?starts_at=2026-01-01&ends_at=2026-02-01"), 401)
    cases = [
        ({"ends_at": "2026-02-01"}, "starts_at is required"),
        ({"starts_at": "yesterday", "ends_at": "2026-02-01"}, "not an ISO 8601"),
        ({"starts_at": "2026-03-01", "ends_at": "2026-02-01"}, "reversed"),
        ({"starts_at": "2026-01-01", "ends_at": "2026-02-01", "cursor": "bm9wZQ"}, "cursor"),
    ]
    for params, message in cases:
        body = problem(await api.http.get("/search", params=params, headers=api.reader), 400)
        assert message in body["detail"]


async def test_a_full_bulkhead_answers_503_at_once_and_recovers(api: Api) -> None:
    service = api.app.state.ingest_search
    params = {"starts_at": "2026-01-01", "ends_at": "2026-02-01"}
    service.bulkhead.active = service.bulkhead.limit  # every slot taken
    started = time.monotonic()
    refused = await api.http.get("/search", params=params, headers=api.reader)
    # Nothing waits (no pool, no statement): only the key lookup, slow on a loaded machine.
    assert time.monotonic() - started < 5.0
    assert problem(refused, 503)["type"].endswith("search-saturated")
    assert refused.headers["Retry-After"] == "1"
    service.bulkhead.active = 0
    assert (await api.http.get("/search", params=params, headers=api.reader)).status_code == 200


async def test_the_cache_serves_hot_first_pages_and_drops_them_when_plans_change(
    api: Api,
) -> None:
    from tests.ingest.harness import add_provider, stage_snapshot

    service = api.app.state.ingest_search
    params = {"starts_at": "2026-01-01", "ends_at": "2028-12-31"}
    async with await open_conn(api.settings) as conn:
        await add_provider(conn, "acme", "http://127.0.0.1:9/feeds/acme")
        empty = await api.http.get("/search", params=params, headers=api.reader)
        assert empty.json()["items"] == [] and len(service.cache) == 0  # empty: not cached
        from herald.ingest.processing import drain_run

        spec = SnapshotSpec(seed=9, plans=200)
        await drain_run(conn, await stage_snapshot(conn, "acme", spec, 1), "w", poll=0.01)
        first = (await api.http.get("/search", params=params, headers=api.reader)).json()
        hits = service.metrics.cache_hits._value.get()
        assert (await api.http.get("/search", params=params, headers=api.reader)).json() == first
        assert service.metrics.cache_hits._value.get() == hits + 1
        await drain_run(conn, await stage_snapshot(conn, "acme", spec, 2), "w", poll=0.01)
        for _ in range(500):  # the processed batches' notifications arrive
            if not len(service.cache):
                break
            await asyncio.sleep(0.02)
        assert len(service.cache) == 0
        fresh = (await api.http.get("/search", params=params, headers=api.reader)).json()
        assert fresh != first
    metrics = await api.http.get("/metrics")
    assert "herald_ingest_search_cache_hits_total" in metrics.text
