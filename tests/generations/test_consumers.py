"""Consumers: signed webhook deliveries with retries and a stable idempotency key; the
feed; new generations told from corrections (review question 4)."""

from __future__ import annotations

import time

import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import outbox, records
from herald.generations.runtime import Generations
from herald.ops import signing
from tests.eventually import eventually
from tests.generations.helpers import PARTITION, land, orders_file, plan, settled, worker
from tests.generations.receiver import Received, receiver


async def _delivered(conn: AsyncConn, count: int) -> None:
    async def probe() -> bool:
        done = await outbox.feed(conn, after=0, limit=10)
        states = [r.state for r in await outbox.deliveries(conn)]
        return len(states) >= count and all(s != "pending" for s in states) and bool(done)

    await eventually(probe, what="the deliveries to settle", within=20, interval=0.1)


@pytest.mark.slow  # waits out delivery backoff
async def test_publications_reach_a_subscribed_webhook_signed_retried_and_deduplicable(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    state = Received(fail_first=2)
    with receiver(state) as url:
        sub, secret = await outbox.subscribe(
            conn,
            name="finance",
            url=url,
            datasets=["orders"],
            actor="ops:ana",
            reason="finance reads orders",
        )
        state.secret = secret
        assert "secret" not in sub.to_json()
        m1 = await land(gens, conn, "a.jsonl", orders_file(0, 10))
        queues = ("generations", "generations.deliver")
        async with worker(gens, settings, queues=queues):
            first = await plan(gens, conn, [m1.id])
            await settled(conn, first.id)
            m2 = await land(gens, conn, "late.jsonl", orders_file(10, 2))
            second = await plan(gens, conn, [m1.id, m2.id], purpose="repair")
            await settled(conn, second.id)
            await _delivered(conn, 2)
    # The first requests failed (503) and were retried with the same webhook-id.
    ids = [r["headers"]["webhook-id"] for r in state.requests]
    assert len(ids) >= 4 and len(set(ids)) == 2
    for failed in ids[:2]:  # each refused delivery came again with its id, and landed
        assert failed in state.processed and ids.count(failed) >= 2
    events = sorted(state.processed.values(), key=lambda e: e["data"]["generation"])
    assert [(e["type"], e["data"]["change"]) for e in events] == [
        ("generation.published", "new"),
        ("generation.corrected", "correction"),
    ]
    # A consumer identifies the authoritative generation and its inputs from the event.
    current = await records.current(conn, "orders", PARTITION)
    assert current is not None
    latest = events[-1]["data"]
    assert latest["publication_id"] == str(current.publication_id)
    assert latest["inputs"] == [m1.id, m2.id]
    assert latest["supersedes"] == events[0]["data"]["publication_id"]
    assert latest["checksum"] == current.checksum
    # The feed serves the same events in order, from a position.
    feed = await outbox.feed(conn, after=0, dataset="orders")
    assert {str(e.event_id) for e in feed} == set(state.processed)
    assert [e.position for e in feed] == sorted(e.position for e in feed)
    assert await outbox.feed(conn, after=feed[-1].position) == []


def test_a_tampered_body_or_an_old_timestamp_does_not_verify() -> None:
    secret = signing.new_secret()
    body = b'{"a": 1}'
    sent = signing.headers(secret, "msg_1", body)
    assert signing.verify(secret, sent, body) == "msg_1"
    for bad_body, bad_headers in (
        (b'{"a": 2}', sent),
        (body, signing.headers(secret, "msg_1", body, now=time.time() - 3600)),
        (body, signing.headers(signing.new_secret(), "msg_1", body)),
    ):
        try:
            signing.verify(secret, bad_headers, bad_body)
        except signing.SignatureError:
            continue
        raise AssertionError("verified a message it should not have")
