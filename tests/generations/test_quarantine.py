"""Quarantine: deterministic failures are held (bounded, redacted, owned, expiring) and
resolved with a reason and audit; transient failures are retried."""

from __future__ import annotations

import dataclasses
import json

import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import quarantine, records
from herald.generations.errors import Refused
from herald.generations.runtime import Generations
from herald.generations.sample import ORDERS
from herald.ops import audit
from herald.ops.errors import AuditInfoMissing
from herald.rows import Job, all_rows, fetch_one
from tests.eventually import eventually
from tests.generations.helpers import PARTITION, land, orders_file, plan, settled, worker


def _bad_file() -> bytes:
    good = orders_file(0, 3)
    bad = json.dumps(
        {
            "order_id": "x1",
            "event_time": f"{PARTITION}T10:00:00Z",
            "customer_email": "secret@example.org",
        }
    )
    return good + bad.encode() + b"\n"


async def test_a_malformed_file_is_quarantined_redacted_and_the_partition_says_so(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    good = await land(gens, conn, "good.jsonl", orders_file(10, 5))
    bad = await land(gens, conn, "bad.jsonl", _bad_file())
    async with worker(gens, settings):
        run = await plan(gens, conn, [good.id, bad.id])
        status = await settled(conn, run.id)
        part = status["partitions_detail"][0]
        assert (part["state"], part["status"], part["job_state"]) == (
            "quarantined",
            "rejected",
            "succeeded",
        )  # a retry could not fix it: no retries
        assert part["attempt"] == 1
        [item] = await quarantine.held_items(conn, "orders", partition=PARTITION)
        assert item.reason_code == "bad_record" and item.owner == "team-orders"
        assert item.manifest_id == bad.id and item.expires_at > item.quarantined_at
        assert item.sample is not None and item.sample["order_id"] == "x1"
        assert item.sample["customer_email"] == quarantine.REDACTED
        # The held file no longer counts as accepted input: a run without it publishes.
        again = await plan(gens, conn, [good.id], purpose="repair")
        await settled(conn, again.id)
    current = await records.current(conn, "orders", PARTITION)
    assert current is not None and current.generation == 1


@pytest.mark.slow
async def test_a_tampered_raw_file_is_quarantined_as_a_checksum_mismatch(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m = await land(gens, conn, "orders.jsonl", orders_file(0, 5))
    path = gens.store.path(m.location)
    path.write_bytes(orders_file(0, 6))
    async with worker(gens, settings):
        run = await plan(gens, conn, [m.id])
        await settled(conn, run.id)
    [item] = await quarantine.held_items(conn, "orders")
    assert item.reason_code == "checksum_mismatch"


@pytest.mark.slow
async def test_the_quarantine_is_bounded_and_expires(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    await records.register_dataset(conn, dataclasses.replace(ORDERS, quarantine_cap=1))
    first = await land(gens, conn, "bad-1.jsonl", _bad_file())
    second = await land(gens, conn, "bad-2.jsonl", _bad_file() + b"\n")
    async with worker(gens, settings):
        r1 = await plan(gens, conn, [first.id])
        await settled(conn, r1.id)
        r2 = await plan(gens, conn, [second.id])
        status = await settled(conn, r2.id)
    detail = status["partitions_detail"][0]
    assert detail["state"] == "failed" and "full" in detail["detail"]
    assert len(await quarantine.held_items(conn, "orders")) == 1
    await conn.execute("SET herald.clock_offset = '8 days'")
    assert await quarantine.expire_on(conn) == 1
    [expired] = await quarantine.held_items(conn, "orders", state="expired")
    assert expired.sample is None  # nothing of the record is kept past expiry


async def test_resolving_needs_a_reason_and_is_audited(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    good = await land(gens, conn, "good.jsonl", orders_file(0, 3))
    bad = await land(gens, conn, "bad.jsonl", _bad_file())
    async with worker(gens, settings):
        run = await plan(gens, conn, [good.id, bad.id])
        await settled(conn, run.id)
        [item] = await quarantine.held_items(conn, "orders")
        with pytest.raises(AuditInfoMissing):
            await quarantine.resolve(gens, conn, item.id, "replay", actor="ops:ana", reason=" ")
        replayed = await quarantine.resolve(
            gens,
            conn,
            item.id,
            "replay",
            actor="ops:ana",
            reason="rebuild with the file as it is",
        )
        # Replaying deterministic bad input fails the same way: held again, not retried.
        replay = await settled(conn, replayed["replay_run"])
        assert replay["partitions_detail"][0]["state"] == "quarantined"
        with pytest.raises(Refused):
            await quarantine.resolve(gens, conn, item.id, "discard", actor="ops:ana", reason="x")
        [again] = await quarantine.held_items(conn, "orders")
        await quarantine.resolve(
            gens,
            conn,
            again.id,
            "discard",
            actor="ops:ana",
            reason="source confirmed the record is void; publish without the file",
        )
        # A discarded file is no longer accepted input: a run without it may publish.
        known = await all_rows(
            conn, "generations_manifests_known", {"dataset": "orders", "partition": PARTITION}
        )
        assert [m["id"] for m in known] == [good.id]
        rebuilt = await plan(gens, conn, [good.id], purpose="repair")
        assert (await settled(conn, rebuilt.id))["partitions_detail"][0]["state"] == "published"
    entries = await audit.entries(conn, target_type="gen_quarantine")
    assert [(e.actor, e.action) for e in entries] == [
        ("ops:ana", "generations.quarantine.discard"),
        ("ops:ana", "generations.quarantine.replay"),
    ]
    entry = entries[1]
    assert entry.before["state"] == "held" and entry.after["state"] == "replayed"


@pytest.mark.slow
async def test_a_transient_read_failure_is_retried_not_quarantined(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m = await land(gens, conn, "orders.jsonl", orders_file(0, 5))
    path = gens.store.path(m.location)
    data = path.read_bytes()
    path.unlink()
    path.mkdir()  # reading it fails with an OSError that is not "gone"
    async with worker(gens, settings):
        run = await plan(gens, conn, [m.id])
        job_id = (await records.run_status(conn, run.id))["partitions_detail"][0]["job_id"]

        async def failed_once() -> bool:
            job = await fetch_one(conn, "get_job", {"id": job_id}, Job)
            return job is not None and bool(job.errors)

        await eventually(failed_once, what="the first attempt's error", within=10)
        path.rmdir()
        path.write_bytes(data)  # the store is back
        status = await settled(conn, run.id)
    part = status["partitions_detail"][0]
    assert part["state"] == "published" and part["attempt"] == 2
    assert await quarantine.held_items(conn, "orders") == []
    assert await all_rows(conn, "generations_decisions_of_run", {"run_id": run.id})
