"""Manual actions over HTTP: dead letters, cancel, retry-now, schedules, audit log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from herald import Worker
from herald.api import ApiSettings, create_app, create_key
from herald.client import Client, open_connection
from herald.config import Settings
from tests.support import APP
from tests.test_api import Api, assert_problem


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    app = create_app(APP, settings, ApiSettings())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        async with await open_connection(settings) as conn:
            token = (await create_key(conn, "oncall", ["operate", "read", "submit"])).token
        yield Api(http, app, settings, token)


async def _dead_job(settings: Settings, client: Client, key: str) -> int:
    """Run one job of kind ``permanent`` to its dead letter; returns the job id."""
    job = await client.enqueue("permanent", {"order": key}, key=key)
    worker = Worker(APP, settings=settings, concurrency=1, maintenance=False)
    running = asyncio.create_task(worker.run())
    try:
        for _ in range(600):
            row = await client.get_job(job.id)
            if row is not None and row.state == "dead":
                return job.id
            await asyncio.sleep(0.05)
        raise AssertionError("the job did not reach its dead letter")
    finally:
        worker.stop()
        await running


async def test_dead_letters_list_show_replay_discard_and_audit(
    api: Api, settings: Settings, client: Client
) -> None:
    job_id = await _dead_job(settings, client, "order-7")
    listed = await api.http.get(
        "/v1/dead-letters",
        params={"kind": "permanent", "error": "NEVER succeed"},
        headers=api.auth(),
    )
    assert [d["job_id"] for d in listed.json()] == [job_id]
    none = await api.http.get(
        "/v1/dead-letters", params={"error": "no such text"}, headers=api.auth()
    )
    assert none.json() == []
    dead_id = listed.json()[0]["id"]
    shown = (await api.http.get(f"/v1/dead-letters/{dead_id}", headers=api.auth())).json()
    assert shown["payload"] == {"order": "order-7"} and shown["reason"] == "permanent"

    no_reason = await api.http.post(
        f"/v1/dead-letters/{dead_id}/replay", json={}, headers=api.auth()
    )
    assert_problem(no_reason, 422)
    replay = await api.http.post(
        f"/v1/dead-letters/{dead_id}/replay", json={"reason": "partner fixed"}, headers=api.auth()
    )
    assert replay.status_code == 202, replay.text
    new_id = replay.json()["id"]
    assert replay.headers["location"] == f"/v1/jobs/{new_id}"
    new_job = (await api.http.get(f"/v1/jobs/{new_id}", headers=api.auth())).json()
    assert new_job["replay_of"] == job_id and new_job["version"] == 2
    assert new_job["state"] == "waiting" and new_job["attempt"] == 0

    # Replayed once: asking again (a retry, a double click) answers the same job.
    again = await api.http.post(
        f"/v1/dead-letters/{dead_id}/replay", json={"reason": "twice"}, headers=api.auth()
    )
    assert again.status_code == 200, again.text
    assert (again.json()["id"], again.json()["outcome"]) == (new_id, "replay")
    jobs = await api.http.get("/v1/jobs", params={"key": "order-7"}, headers=api.auth())
    assert len(jobs.json()) == 2  # the dead one and its one replay

    pending = await api.http.post(
        f"/v1/dead-letters/{dead_id}/discard", json={"reason": "done"}, headers=api.auth()
    )
    assert_problem(pending, 409)
    forced = await api.http.post(
        f"/v1/dead-letters/{dead_id}/discard",
        json={"reason": "nothing to clean", "force": True},
        headers=api.auth(),
    )
    assert forced.status_code == 200 and forced.json()["id"] == dead_id
    assert_problem(await api.http.get(f"/v1/dead-letters/{dead_id}", headers=api.auth()), 404)

    log = (await api.http.get("/v1/audit", params={"actor": "oncall"}, headers=api.auth())).json()
    assert [(e["action"], e["reason"]) for e in log] == [
        ("discard", "nothing to clean"),
        ("replay", "partner fixed"),
    ]
    assert all(e["target_type"] == "dead_letter" and e["target_id"] == str(dead_id) for e in log)


async def test_cancel_and_retry_now_need_operate_and_a_reason(api: Api, client: Client) -> None:
    later = await client.enqueue("noop", key="later", run_at=None, priority=None)
    async with await open_connection(api.settings) as conn:
        await conn.execute(
            "UPDATE jobs SET run_at = herald_now() + interval '1 day' WHERE id = %s", (later.id,)
        )
        reader = (await create_key(conn, "viewer", ["read"])).token
    refused = await api.http.post(
        f"/v1/jobs/{later.id}/retry", json={"reason": "now"}, headers=api.auth(reader)
    )
    assert_problem(refused, 403)
    assert_problem(
        await api.http.post(
            f"/v1/jobs/{later.id}/retry", json={"reason": "  "}, headers=api.auth()
        ),
        422,
    )
    retried = await api.http.post(
        f"/v1/jobs/{later.id}/retry", json={"reason": "customer waiting"}, headers=api.auth()
    )
    assert retried.status_code == 200
    job = (await api.http.get(f"/v1/jobs/{later.id}", headers=api.auth())).json()
    assert job["state"] == "waiting"
    async with await open_connection(api.settings) as conn:
        cur = await conn.execute(
            "SELECT run_at <= herald_now() AS due FROM jobs WHERE id = %s", (later.id,)
        )
        assert (await cur.fetchone()) == {"due": True}

    cancelled = await api.http.post(
        f"/v1/jobs/{later.id}/cancel", json={"reason": "not needed"}, headers=api.auth()
    )
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    twice = await api.http.post(
        f"/v1/jobs/{later.id}/cancel", json={"reason": "again"}, headers=api.auth()
    )
    assert_problem(twice, 409)
    assert_problem(
        await api.http.post("/v1/jobs/424242/cancel", json={"reason": "x"}, headers=api.auth()),
        404,
    )
    actions = [e["action"] for e in (await api.http.get("/v1/audit", headers=api.auth())).json()]
    assert actions == ["cancel", "retry_now"]


async def test_schedules_crud_pause_resume(api: Api) -> None:
    spec = {
        "kind": "noop",
        "key": "daily-report",
        "frequency": "daily",
        "timezone": "Europe/Paris",
        "at": "06:30",
        "payload": {"report": "sales"},
    }
    created = await api.http.post(
        "/v1/schedules", json={**spec, "reason": "sales want it daily"}, headers=api.auth()
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    log = await api.http.get(
        "/v1/audit", params={"target_type": "schedule", "action": "create"}, headers=api.auth()
    )
    assert [(e["target_id"], e["reason"]) for e in log.json()] == [
        (str(sid), "sales want it daily")
    ]
    assert created.headers["location"] == f"/v1/schedules/{sid}"
    shown = (await api.http.get(f"/v1/schedules/{sid}", headers=api.auth())).json()
    assert shown["timezone"] == "Europe/Paris" and shown["at_time"] == "06:30:00"
    assert shown["paused"] is False

    for bad in (
        {**spec, "timezone": "Mars/Olympus"},
        {**spec, "kind": "no_such_kind"},
        {**spec, "frequency": "weekly"},  # a weekly rule needs a weekday
        {**spec, "frequency": "cron", "at": None, "cron": "61 * * * *"},
        {**spec, "frequency": "cron", "at": None, "cron": "0 0 31 2 *"},  # never fires
    ):
        assert_problem(await api.http.post("/v1/schedules", json=bad, headers=api.auth()), 422)

    changed = await api.http.patch(
        f"/v1/schedules/{sid}", json={"reason": "later", "at": "07:00"}, headers=api.auth()
    )
    assert changed.status_code == 200 and changed.json()["at_time"] == "07:00:00"
    assert_problem(
        await api.http.patch(f"/v1/schedules/{sid}", json={"at": "08:00"}, headers=api.auth()),
        422,
    )
    paused = await api.http.post(
        f"/v1/schedules/{sid}/pause", json={"reason": "holiday"}, headers=api.auth()
    )
    assert paused.json()["paused"] is True
    listed = await api.http.get("/v1/schedules", params={"paused": "true"}, headers=api.auth())
    assert [s["id"] for s in listed.json()] == [sid]
    resumed = await api.http.post(
        f"/v1/schedules/{sid}/resume", json={"reason": "back"}, headers=api.auth()
    )
    assert resumed.json()["paused"] is False
    fires = await api.http.get(f"/v1/schedules/{sid}/fires", headers=api.auth())
    assert fires.json() == []
    deleted = await api.http.request(
        "DELETE", f"/v1/schedules/{sid}", json={"reason": "retired"}, headers=api.auth()
    )
    assert deleted.status_code == 200
    assert_problem(await api.http.get(f"/v1/schedules/{sid}", headers=api.auth()), 404)
    assert_problem(
        await api.http.post(
            f"/v1/schedules/{sid}/pause", json={"reason": "gone"}, headers=api.auth()
        ),
        404,
    )
