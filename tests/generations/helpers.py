"""Shared by the generations tests: a sample partition's input, an in-process worker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import records
from herald.generations.rows import Manifest, Run
from herald.generations.runtime import Generations
from herald.generations.sample import DATASET, ORDERS, VERSION
from herald.worker import Worker
from tests.eventually import eventually

PARTITION = "2026-07-14"
DAY = datetime(2026, 7, 14, tzinfo=UTC)


def orders_file(first: int, count: int, day: str = PARTITION, **extra: object) -> bytes:
    lines = [
        json.dumps(
            {
                "order_id": f"o{n:05d}",
                "amount_cents": 100 + n,
                "currency": "EUR",
                "event_time": f"{day}T09:{n % 60:02d}:00Z",
                "customer_email": f"c{n}@example.org",
                **extra,
            }
        )
        for n in range(first, first + count)
    ]
    return ("\n".join(lines) + "\n").encode()


async def land(
    gens: Generations, conn: AsyncConn, name: str, data: bytes, partition: str = PARTITION
) -> Manifest:
    """A source delivers a file for the partition: raw bytes and their manifest."""
    return await records.receive_input(
        gens,
        conn,
        dataset_name=DATASET,
        source="shop-export",
        owner="team-orders",
        name=name,
        data=data,
        schema_version=1,
        event_time_from=DAY,
        event_time_to=DAY.replace(hour=23),
        record_count=data.count(b"\n"),
        partitions=[partition],
    )


async def plan(
    gens: Generations,
    conn: AsyncConn,
    manifests: Sequence[int],
    *,
    purpose: str = "scheduled",
    policy: str = "wait",
    partitions: Sequence[str] = (PARTITION,),
    run_id: int | None = None,
    intent: str = "publish",
) -> Run:
    return await records.plan_run(
        gens,
        conn,
        dataset_name=DATASET,
        purpose=purpose,
        definition_version=VERSION,
        manifest_ids=manifests,
        partitions=partitions,
        policy=policy,
        intent=intent,
        requested_by="test",
        reason=f"{purpose} run",
        run_id=run_id,
    )


async def setup(gens: Generations, conn: AsyncConn) -> None:
    await records.register_dataset(conn, ORDERS)


@asynccontextmanager
async def worker(
    gens: Generations,
    settings: Settings,
    queues: Sequence[str] = ("generations",),
    concurrency: int = 4,
) -> AsyncIterator[Worker]:
    w = Worker(gens.app, queues=list(queues), concurrency=concurrency, settings=settings)
    task = asyncio.create_task(w.run())
    try:
        yield w
    finally:
        w.stop()
        await asyncio.wait_for(task, 30)


async def settled(conn: AsyncConn, run_id: int, within: float = 20.0) -> dict[str, Any]:
    """The run's status (the API's document) once it settled."""

    async def probe() -> dict[str, Any] | None:
        status = await records.run_status(conn, run_id)
        return status if status["state"] == "settled" else None

    return await eventually(probe, what=f"run {run_id} to settle", within=within)


async def left_queue(conn: AsyncConn, run_id: int, within: float = 20.0) -> dict[str, Any]:
    """The run's status once none of its partitions is queued or building."""

    async def probe() -> dict[str, Any] | None:
        status = await records.run_status(conn, run_id)
        building = any(p["state"] in ("queued", "building") for p in status["partitions_detail"])
        return None if building else status

    return await eventually(probe, what=f"run {run_id} to leave the queue", within=within)
