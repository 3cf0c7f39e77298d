"""The operator surface over HTTP: a partition's truth, why each candidate was or was not
chosen, tasks with lease and fence, late sources, and safe actions that need a scope and
a reason and are audited (review questions 5 and 6)."""

from __future__ import annotations

import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations.runtime import Generations
from herald.ops import audit
from tests.generations.conftest import Api
from tests.generations.helpers import (
    PARTITION,
    land,
    left_queue,
    orders_file,
    plan,
    settled,
    worker,
)

PATH = f"/v1/generations/datasets/orders/partitions/{PARTITION}"


async def test_q5_an_operator_finds_owner_failure_affected_output_and_safe_action(
    gens: Generations, conn: AsyncConn, settings: Settings, api: Api
) -> None:
    m1 = await land(gens, conn, "orders.jsonl", orders_file(0, 10))
    async with worker(gens, settings):
        first = await plan(gens, conn, [m1.id])
        await settled(conn, first.id)
        late = await land(gens, conn, "late.jsonl", orders_file(10, 3))
        daily = await plan(gens, conn, [m1.id])  # planned without the late file
        await left_queue(conn, daily.id)
    got = (await api.http.get(f"/v1/generations/runs/{daily.id}", headers=api.as_("reader"))).json()
    # The producer sees its run delayed, and why.
    detail = got["partitions_detail"][0]
    assert (detail["state"], detail["status"]) == ("waiting", "delayed")
    assert f"accepted manifests {late.id} arrived after" in detail["detail"]

    # Reading a partition's operator view needs operate.
    assert (await api.http.get(PATH, headers=api.as_("reader"))).status_code == 403
    view = (await api.http.get(PATH, headers=api.as_("oncall"))).json()
    assert view["owner"] == "team-orders"
    assert view["current"]["generation"] == 1
    waiting = [c for c in view["candidates"] if c["state"] == "waiting"]
    assert len(waiting) == 1 and waiting[0]["reason_code"] == "missing_input"
    published = [c for c in view["candidates"] if c["state"] == "published"]
    assert published[0]["reason_code"] == "base_current"
    assert [m["id"] for m in view["late_sources"]] == [late.id]
    actions = {(a["action"], a["scope"]) for a in view["safe_actions"]}
    assert {("publish", "operate"), ("override", "admin"), ("discard", "operate")} <= actions

    candidate = waiting[0]["id"]
    body = {"action": "override", "candidate": candidate}
    # No reason: refused before anything happens.
    assert (
        await api.http.post(f"{PATH}/actions", json=body, headers=api.as_("lead"))
    ).status_code == 422
    body["reason"] = "finance needs the daily numbers now; late file follows as a repair"
    # Override needs admin.
    assert (
        await api.http.post(f"{PATH}/actions", json=body, headers=api.as_("oncall"))
    ).status_code == 403
    done = await api.http.post(f"{PATH}/actions", json=body, headers=api.as_("lead"))
    assert done.status_code == 200, done.text
    assert done.json()["decision"]["decision"] == "publish"
    assert done.json()["decision"]["generation"] == 2
    [entry] = await audit.entries(conn, target_type="gen_candidate")
    assert entry.actor == "lead" and entry.reason == body["reason"]
    # The action cannot be repeated on a settled candidate.
    again = await api.http.post(f"{PATH}/actions", json=body, headers=api.as_("lead"))
    assert again.status_code == 409


@pytest.mark.slow
async def test_running_tasks_show_lease_and_fence_and_a_queued_task_can_be_skipped(
    gens: Generations, conn: AsyncConn, api: Api
) -> None:
    m1 = await land(gens, conn, "orders.jsonl", orders_file(0, 10))
    run = await plan(gens, conn, [m1.id])  # no worker: it stays queued
    view = (await api.http.get(PATH, headers=api.as_("oncall"))).json()
    [task] = view["running_tasks"]
    assert task["run_id"] == run.id and task["job_state"] == "waiting"
    assert task["fence"] == 0 and task["lease_owner"] is None
    skip = {"action": "skip", "run": run.id, "reason": "wrong input declared"}
    done = await api.http.post(f"{PATH}/actions", json=skip, headers=api.as_("oncall"))
    assert done.status_code == 200, done.text
    got = (await api.http.get(f"/v1/generations/runs/{run.id}", headers=api.as_("reader"))).json()
    assert got["state"] == "settled"
    assert got["partitions_detail"][0]["job_state"] == "cancelled"
    actions = [e.action for e in await audit.entries(conn)]
    assert "generations.skip" in actions and "cancel" in actions
