"""The reference's six review questions, each answered by a test.

1. a producer tells rejected / accepted / delayed / completed   -> test_q1 (here)
2. every retry has an idempotency, fencing or compensation boundary -> test_q2 (here)
3. live traffic survives the largest backfill -> test_q3 in test_live_beside_backfill.py
4. a consumer identifies the authoritative generation and inputs -> test_q4 (here)
5. an operator finds owner, failure, affected output, safe action -> test_q5 in
   test_operator.py
6. security, observability and cost follow the contract          -> test_q6 (here)
"""

from __future__ import annotations

import json

import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import outbox, records
from herald.generations.runtime import Generations
from herald.generations.store import AlreadyWritten, attempt_location
from herald.ops import audit, signing
from herald.rows import maybe_row
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

RUNS = "/v1/generations/runs"


async def test_q1_a_producer_tells_rejected_accepted_delayed_and_completed(
    gens: Generations, conn: AsyncConn, settings: Settings, api: Api
) -> None:
    good = await land(gens, conn, "good.jsonl", orders_file(0, 5))
    body = {
        "dataset": "orders",
        "purpose": "scheduled",
        "definition_version": "v18",
        "manifest_ids": [good.id],
        "partitions": [PARTITION],
        "policy": "wait",
        "reason": "daily",
    }
    # Rejected at admission: an input that does not exist.
    refused = await api.http.post(
        RUNS, json={**body, "manifest_ids": [999]}, headers=api.as_("oncall")
    )
    assert refused.status_code == 422 and "manifest" in refused.json()["detail"]
    # Accepted: declared, its task queued.
    accepted = await api.http.post(RUNS, json=body, headers=api.as_("oncall"))
    assert accepted.status_code == 201
    assert accepted.json()["partitions_detail"][0]["status"] == "accepted"
    async with worker(gens, settings):
        await settled(conn, accepted.json()["id"])
        late = await land(gens, conn, "late.jsonl", orders_file(5, 2))
        delayed = (await api.http.post(RUNS, json=body, headers=api.as_("oncall"))).json()
        await left_queue(conn, delayed["id"])
        bad = await land(gens, conn, "bad.jsonl", b'{"order_id": "x"}\n')
        rejected = (
            await api.http.post(
                RUNS,
                json={**body, "manifest_ids": [good.id, late.id, bad.id]},
                headers=api.as_("oncall"),
            )
        ).json()
        await settled(conn, rejected["id"])

    async def status(run_id: int) -> tuple[str, str]:
        got = (await api.http.get(f"{RUNS}/{run_id}", headers=api.as_("reader"))).json()
        part = got["partitions_detail"][0]
        return part["status"], part["detail"]

    assert (await status(accepted.json()["id"]))[0] == "completed"
    delayed_status, why = await status(delayed["id"])
    assert delayed_status == "delayed" and f"accepted manifests {late.id}" in why
    rejected_status, why = await status(rejected["id"])
    assert rejected_status == "rejected" and "bad_record" in why


async def test_q2_every_retry_has_a_fencing_or_idempotency_boundary(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m = await land(gens, conn, "orders.jsonl", orders_file(0, 5))
    run = await plan(gens, conn, [m.id])
    task = (await records.run_status(conn, run.id))["partitions_detail"][0]
    # A task is one job per (run, partition): declaring it again cannot double it.
    again = await gens.admitter.enqueue(
        "generations.build",
        {"run_id": run.id, "partition": PARTITION},
        key=f"run:{run.id}:{PARTITION}",
        conn=conn,
    )
    assert again.id == task["job_id"] and again.outcome == "in_progress"
    # Each attempt (fence) writes to its own location; a location is written once.
    first = attempt_location("orders", PARTITION, run.id, task["job_id"], 1)
    second = attempt_location("orders", PARTITION, run.id, task["job_id"], 2)
    assert first != second
    gens.store.write_once(first, b"attempt 1\n")
    with pytest.raises(AlreadyWritten):
        gens.store.write_once(first, b"attempt 2 overwriting\n")
    # Registration is fenced by the engine's job fence (only the running, current
    # attempt), and a registered candidate's record cannot be edited afterwards.
    async with worker(gens, settings):
        await settled(conn, run.id)
    candidate = await maybe_row(
        conn, "generations_candidates_of_partition", {"dataset": "orders", "partition": PARTITION}
    )
    # The bytes planted at fence 1's location were never overwritten: that attempt
    # failed (a retry), and the retry wrote under fence 2.
    assert candidate is not None and candidate["fence"] == 2
    assert gens.store.read(first) == b"attempt 1\n"
    with pytest.raises(Exception, match="immutable"):
        await conn.execute(
            "UPDATE gen_candidates SET checksum = %s WHERE id = %s",
            ("sha256:" + "1" * 64, candidate["id"]),
        )
    with pytest.raises(Exception, match="immutable"):
        await conn.execute("UPDATE gen_input_manifests SET record_count = 0")
    # A delivery's retries carry the same idempotency key: the outbox event's id.
    _sub, secret = await outbox.subscribe(
        conn, name="s", url="http://127.0.0.1:9/h", datasets=["orders"], actor="ops", reason="test"
    )
    event = (await outbox.feed(conn))[0]
    body = outbox.body_of(event)
    assert outbox.body_of(event) == body  # the same bytes on every attempt
    headers = signing.headers(secret, str(event.event_id), body)
    assert signing.verify(secret, headers, body) == str(event.event_id)


async def test_q4_a_consumer_identifies_the_authoritative_generation_and_its_inputs(
    gens: Generations, conn: AsyncConn, settings: Settings, api: Api
) -> None:
    m1 = await land(gens, conn, "orders.jsonl", orders_file(0, 8))
    async with worker(gens, settings):
        await settled(conn, (await plan(gens, conn, [m1.id])).id)
        m2 = await land(gens, conn, "late.jsonl", orders_file(8, 2))
        await settled(conn, (await plan(gens, conn, [m1.id, m2.id], purpose="repair")).id)
    path = f"/v1/generations/datasets/orders/partitions/{PARTITION}/current"
    got = await api.http.get(path, headers=api.as_("reader"))
    assert got.status_code == 200, got.text
    current = got.json()
    assert current["generation"] == 2 and current["change"] == "correction"
    assert [i["id"] for i in current["inputs"]] == [m1.id, m2.id]
    assert current["inputs"][1]["checksum"] == m2.checksum
    assert current["definition_version"] == "v18" and current["row_count"] == 10
    feed = (
        await api.http.get("/v1/generations/feed?dataset=orders", headers=api.as_("reader"))
    ).json()
    assert [e["payload"]["change"] for e in feed] == ["new", "correction"]
    # The newest event names the same publication the pointer does: the consumer can
    # deduplicate on it and knows it replaces the earlier one.
    assert feed[-1]["publication_id"] == current["publication_id"]
    assert feed[-1]["payload"]["supersedes"] == feed[0]["publication_id"]
    assert feed[-1]["payload"]["inputs"] == [m1.id, m2.id]


async def test_q6_security_observability_and_cost_follow_the_contract(
    gens: Generations, conn: AsyncConn, settings: Settings, api: Api
) -> None:
    m1 = await land(gens, conn, "orders.jsonl", orders_file(0, 5))
    bad = await land(
        gens,
        conn,
        "bad.jsonl",
        orders_file(5, 1, amount_cents=None).replace(b'"amount_cents": null, ', b""),
    )
    async with worker(gens, settings):
        await settled(conn, (await plan(gens, conn, [m1.id, bad.id])).id)
    quarantine_path = "/v1/generations/datasets/orders/quarantine"
    view_path = f"/v1/generations/datasets/orders/partitions/{PARTITION}"
    # Least privilege: reading the feed is not reading quarantined data or acting.
    assert (await api.http.get(quarantine_path, headers=api.as_("reader"))).status_code == 403
    assert (await api.http.get(view_path, headers=api.as_("reader"))).status_code == 403
    assert (await api.http.get(quarantine_path)).status_code == 401
    held = (await api.http.get(quarantine_path, headers=api.as_("oncall"))).json()
    [item] = held
    # Configured fields are redacted before they are stored, owner and expiry are set.
    assert item["sample"]["customer_email"] == "[redacted]"
    assert item["owner"] == "team-orders" and item["expires_at"]
    stored = await maybe_row(conn, "generations_quarantine_get", {"id": item["id"]})
    assert stored is not None and "@example.org" not in json.dumps(stored, default=str)
    # A webhook secret is shown once, at creation, and never stored in what is served.
    made = await api.http.post(
        "/v1/generations/subscriptions",
        headers=api.as_("oncall"),
        json={
            "name": "bi",
            "url": "http://127.0.0.1:9/h",
            "datasets": ["orders"],
            "reason": "BI dashboards",
        },
    )
    assert made.status_code == 201 and made.json()["secret"].startswith("whsec_")
    feed = (await api.http.get("/v1/generations/feed", headers=api.as_("reader"))).text
    assert made.json()["secret"] not in feed
    # Every manual action is audited with actor and reason; a resolution needs a reason.
    no_reason = await api.http.post(
        f"/v1/generations/quarantine/{item['id']}/discard",
        json={"reason": ""},
        headers=api.as_("oncall"),
    )
    assert no_reason.status_code == 422
    done = await api.http.post(
        f"/v1/generations/quarantine/{item['id']}/discard",
        json={"reason": "void test order"},
        headers=api.as_("oncall"),
    )
    assert done.status_code == 200
    actions = {(e.actor, e.action) for e in await audit.entries(conn)}
    assert {
        ("oncall", "generations.subscribe"),
        ("oncall", "generations.quarantine.discard"),
    } <= actions
    # Observability: every coordinator decision is recorded with a reason code.
    view = (await api.http.get(view_path, headers=api.as_("oncall"))).json()
    assert {d["decision"] for d in view["decisions"]} == {"quarantine"}
    assert all(d["reason"] and d["reason_code"] for d in view["decisions"])
