"""Publication through real workers: generations, the pointer, decisions, the outbox."""

from __future__ import annotations

import psycopg
import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import outbox, records
from herald.generations.runtime import Generations
from herald.rows import maybe_row
from tests.generations.helpers import PARTITION, land, orders_file, plan, settled, worker


async def test_first_run_publishes_generation_one_and_a_correction_generation_two(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m1 = await land(gens, conn, "orders-0900.jsonl", orders_file(0, 20))
    async with worker(gens, settings):
        first = await plan(gens, conn, [m1.id])
        status = await settled(conn, first.id)
        assert [p["state"] for p in status["partitions_detail"]] == ["published"]
        m2 = await land(gens, conn, "orders-late.jsonl", orders_file(20, 5))
        second = await plan(gens, conn, [m1.id, m2.id], purpose="repair")
        await settled(conn, second.id)
    current = await records.current(conn, "orders", PARTITION)
    assert current is not None
    assert current.generation == 2 and current.run_id == second.id
    assert current.row_count == 25 and current.manifest_ids == [m1.id, m2.id]
    feed = await outbox.feed(conn, after=0, limit=10)
    assert [(e.event_type, e.payload["change"]) for e in feed] == [
        ("generation.published", "new"),
        ("generation.corrected", "correction"),
    ]
    assert feed[1].payload["supersedes"] == str(feed[0].publication_id)


async def test_a_stale_fence_cannot_register_a_candidate(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m1 = await land(gens, conn, "orders.jsonl", orders_file(0, 3))
    run = await plan(gens, conn, [m1.id])
    detail = (await records.run_status(conn, run.id))["partitions_detail"][0]
    with pytest.raises(psycopg.errors.LockNotAvailable):
        await maybe_row(
            conn,
            "generations_candidate_insert",
            {
                "run_id": run.id,
                "dataset": "orders",
                "partition": PARTITION,
                "job_id": detail["job_id"],
                "attempt": 1,
                "fence": 1,
                "worker": "zombie",
                "location": "out/x",
                "checksum": "sha256:" + "0" * 64,
                "row_count": 3,
                "schema_version": 1,
                "quality": "{}",
                "lineage": "{}",
            },
        )
