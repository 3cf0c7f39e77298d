"""A partition with something of everything an operator looks at, for the console's tests.

``orders/2026-07-14``: generation 1 published from the first file; a late file lands; a
run planned without it is discarded by its policy; a repair with it publishes generation
2; a run planned without the late file again waits; a malformed file is
quarantined; a file of another day makes a candidate with no rows, rejected by the
pre-publication checks; a webhook subscription has a pending delivery; a declared
backfill (a dry run) has its task queued.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg.rows import tuple_row

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import backfill, outbox, quarantine
from herald.generations.runtime import Generations
from herald.generations.sample import VERSION
from tests.generations.helpers import PARTITION, land, left_queue, orders_file, plan, worker


@dataclass(frozen=True)
class Scene:
    first: int  # the input of generation 1
    late: int  # the input that arrived after it
    published_run: int
    discarded_run: int
    repair_run: int  # generation 2: the first one with the late input
    waiting_run: int
    waiting_candidate: int
    misfiled: int  # an input of another day, late for the partition
    rejected_run: int
    rejected_candidate: int
    quarantined_run: int
    held_item: int
    backfill: int
    backfill_run: int


async def build_scene(gens: Generations, conn: AsyncConn, settings: Settings) -> Scene:
    await outbox.subscribe(
        conn,
        name="finance-warehouse",
        url="http://127.0.0.1:9/hook",
        datasets=["orders"],
        actor="setup",
        reason="finance reads orders",
    )
    first = await land(gens, conn, "orders.jsonl", orders_file(0, 10))
    bad_record = json.dumps({"order_id": "x1", "event_time": f"{PARTITION}T10:00:00Z"})
    async with worker(gens, settings):
        published = await plan(gens, conn, [first.id])
        await left_queue(conn, published.id)
        late = await land(gens, conn, "late.jsonl", orders_file(10, 3))
        discarded = await plan(gens, conn, [first.id], policy="discard")
        await left_queue(conn, discarded.id)
        repair = await plan(gens, conn, [first.id, late.id], purpose="repair")
        await left_queue(conn, repair.id)
        waiting = await plan(gens, conn, [first.id], policy="wait")  # misses the late one
        await left_queue(conn, waiting.id)
        bad = await land(gens, conn, "bad.jsonl", orders_file(20, 2) + bad_record.encode())
        held = await plan(gens, conn, [first.id, late.id, bad.id], purpose="repair")
        await left_queue(conn, held.id)
        other_day = await land(gens, conn, "misfiled.jsonl", orders_file(30, 4, day="2026-07-15"))
        rejected = await plan(gens, conn, [other_day.id], purpose="repair")
        await left_queue(conn, rejected.id)
    declared = await backfill.declare(
        gens,
        conn,
        dataset_name="orders",
        source_from=datetime(2026, 7, 1, tzinfo=UTC),
        source_to=datetime(2030, 1, 1, tzinfo=UTC),
        definition_version=VERSION,
        partitions=[PARTITION],
        policy="wait",
        # A dry run: where a worker serves its queue, it never publishes (which would
        # move the waiting candidate on) yet shows its progress.
        intent="dry_run",
        expected_cost={"input_records": 19},
        writes_per_second=5.0,
        concurrency=1,
        actor="setup",
        reason="definition v18 rebuilt July",
    )
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(
        b"SELECT run_id, id, state FROM gen_candidates WHERE run_id = ANY(%s) ORDER BY id",
        ([waiting.id, rejected.id],),
    )
    candidates = {row[0]: (row[1], row[2]) for row in await cur.fetchall()}
    assert candidates[waiting.id][1] == "waiting", candidates
    assert candidates[rejected.id][1] == "rejected", candidates
    [item] = await quarantine.held_items(conn, "orders", partition=PARTITION)
    assert declared.run_id is not None  # declared with its run, in one transaction
    return Scene(
        first=first.id,
        late=late.id,
        published_run=published.id,
        discarded_run=discarded.id,
        repair_run=repair.id,
        waiting_run=waiting.id,
        waiting_candidate=candidates[waiting.id][0],
        misfiled=other_day.id,
        rejected_run=rejected.id,
        rejected_candidate=candidates[rejected.id][0],
        quarantined_run=held.id,
        held_item=item.id,
        backfill=declared.id,
        backfill_run=declared.run_id,
    )
