"""Orphaned attempt output is kept for a while, then collected - never a registered
candidate's bytes, never those of an attempt that may still register them."""

from __future__ import annotations

from herald import sql
from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import collection, records
from herald.generations.runtime import Generations
from herald.generations.store import attempt_location
from tests.generations.helpers import PARTITION, land, orders_file, plan, settled, worker


async def test_orphans_are_collected_and_candidates_kept(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m = await land(gens, conn, "orders.jsonl", orders_file(0, 5))
    run = await plan(gens, conn, [m.id])
    job = (await records.run_status(conn, run.id))["partitions_detail"][0]["job_id"]
    # Bytes at fence 1's location: that attempt fails (never overwrites), fence 2 publishes.
    orphan = attempt_location("orders", PARTITION, run.id, job, 1)
    gens.store.write_once(orphan, b"left behind\n")
    # A fictitious later attempt: once the job is done, no fence 99 can ever register.
    never = attempt_location("orders", PARTITION, run.id, job, 99)
    gens.store.write_once(never, b"never registered\n")
    async with worker(gens, settings):
        await settled(conn, run.id)
    current = await records.current(conn, "orders", PARTITION)
    assert current is not None and current.location is not None
    assert current.location.endswith("fence-2.jsonl")
    assert await collection.collect(gens, conn, retention=3600) == []  # too young
    collected = await collection.collect(gens, conn, retention=0)
    assert sorted(collected) == sorted([orphan, never])
    assert gens.store.exists(current.location)
    assert not gens.store.exists(orphan)


async def test_the_output_of_an_attempt_still_running_is_kept(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    m = await land(gens, conn, "orders.jsonl", orders_file(0, 5))
    run = await plan(gens, conn, [m.id])
    cur = await conn.execute(
        sql.query("claim"),
        {
            "queues": ["generations"],
            "kinds": ["generations.build"],
            "limit": 1,
            "owner": "a-worker",
            "lease_s": 60,
            "suspects": 1,
        },
    )
    [claimed] = await cur.fetchall()  # running under fence 1, as a worker would hold it
    in_flight = attempt_location("orders", PARTITION, run.id, claimed["id"], claimed["fence"])
    gens.store.write_once(in_flight, b"not registered yet\n")
    assert await collection.collect(gens, conn, retention=0) == []
    assert gens.store.exists(in_flight)
