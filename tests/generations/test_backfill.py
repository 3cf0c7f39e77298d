"""Backfills as declared work: stated up front, their own queue, throttled, progress per
partition, never taking live workers."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import backfill
from herald.generations.errors import PlanError
from herald.generations.sample import VERSION
from herald.generations.shared import BACKFILL_QUEUE, Generations
from herald.ops.audit import entries
from tests.generations.helpers import land, orders_file, settled, worker

DAYS = [f"2026-06-{d:02d}" for d in range(1, 6)]


async def _declare(gens: Generations, conn: AsyncConn, rate: float) -> int:
    for day in DAYS:
        await land(gens, conn, f"orders-{day}.jsonl", orders_file(0, 20, day=day), partition=day)
    row = await backfill.declare(
        gens,
        conn,
        dataset_name="orders",
        source_from=datetime(2026, 6, 1, tzinfo=UTC),
        source_to=datetime(2026, 7, 31, tzinfo=UTC),
        definition_version=VERSION,
        partitions=DAYS,
        policy="rebase",
        expected_cost={"tasks": len(DAYS), "rows": 100, "seconds": 2},
        writes_per_second=rate,
        concurrency=1,
        actor="ops:ana",
        reason="v18 fixes currency",
    )
    return row.id


@pytest.mark.slow
async def test_a_backfill_is_declared_queued_apart_throttled_and_shows_progress(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    backfill_id = await _declare(gens, conn, rate=8.0)
    before = await backfill.progress(conn, backfill_id)
    assert (before["done"], before["total"]) == (0, len(DAYS))
    assert before["expected_cost"]["tasks"] == len(DAYS) and before["concurrency"] == 1
    # A live worker does not take backfill tasks.
    async with worker(gens, settings, queues=("generations",)):
        await asyncio.sleep(0.5)
    assert (await backfill.progress(conn, backfill_id))["done"] == 0
    started = time.monotonic()
    async with worker(gens, settings, queues=(BACKFILL_QUEUE,), concurrency=4):
        status = await settled(conn, before["run_id"], within=30)
    elapsed = time.monotonic() - started
    assert {p["state"] for p in status["partitions_detail"]} == {"published"}
    after = await backfill.progress(conn, backfill_id)
    assert after["done"] == after["total"] == len(DAYS)
    assert [p["partition"] for p in after["partitions_progress"]] == DAYS
    # 8 writes per second, one token at a time: five tasks take at least half a second.
    assert elapsed >= (len(DAYS) - 1) / 8.0
    [entry] = await entries(conn, target_type="gen_backfill")
    assert entry.reason == "v18 fixes currency"


async def test_a_backfill_must_state_its_cost_and_find_retained_input(
    gens: Generations, conn: AsyncConn
) -> None:
    with pytest.raises(PlanError):
        await backfill.declare(
            gens,
            conn,
            dataset_name="orders",
            source_from=datetime(2020, 1, 1, tzinfo=UTC),
            source_to=datetime(2020, 2, 1, tzinfo=UTC),
            definition_version=VERSION,
            partitions=["2020-01-01"],
            policy="wait",
            expected_cost={"tasks": 1},
            writes_per_second=1,
            concurrency=1,
            actor="ops:ana",
            reason="nothing there",
        )
    with pytest.raises(PlanError):
        await backfill.declare(
            gens,
            conn,
            dataset_name="orders",
            source_from=datetime(2026, 6, 1, tzinfo=UTC),
            source_to=datetime(2026, 7, 1, tzinfo=UTC),
            definition_version=VERSION,
            partitions=DAYS,
            policy="wait",
            expected_cost={},
            writes_per_second=1,
            concurrency=1,
            actor="ops:ana",
            reason="no cost",
        )
