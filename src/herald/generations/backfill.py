"""Backfills as declared work: source range, definition version, partitions, policy and
expected cost stated up front, in a queue of their own, throttled.

A backfill is one run of purpose ``backfill`` whose tasks are ``generations.backfill``
jobs on the ``generations.backfill`` queue. Each task takes a slot of the backfill's
concurrency share and a token of its write rate before it builds (a snooze, not an
attempt, when none is free), so a backfill never holds more than its share of workers
nor writes faster than declared. Workers serving live queues keep their capacity:
deploy backfill workers with ``--queues generations.backfill`` and a small
``--concurrency`` (the reserved slice for live work is what they do not take).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from herald.context import JobContext
from herald.db import AsyncConn
from herald.generations import records
from herald.generations.errors import NotFound, PlanError
from herald.generations.records import plan_run
from herald.generations.rows import Backfill, Manifest
from herald.ops import audit, limits
from herald.rows import fetch_all, fetch_one, from_row, one_row

if TYPE_CHECKING:
    from herald.generations.shared import Generations


async def declare(
    gen: Generations,
    conn: AsyncConn,
    *,
    dataset_name: str,
    source_from: datetime,
    source_to: datetime,
    definition_version: str,
    partitions: Sequence[str],
    policy: str,
    expected_cost: dict[str, Any],
    writes_per_second: float,
    concurrency: int,
    actor: str,
    reason: str,
    intent: str = "publish",
) -> Backfill:
    """Declare and start a backfill over the manifests received in the source range."""
    actor, reason = audit.require(actor, reason)
    if not expected_cost:
        raise PlanError("a backfill states its expected cost up front")
    async with conn.transaction():
        manifests = await fetch_all(
            conn,
            "generations_manifests_in_range",
            {
                "dataset": dataset_name,
                "from": source_from,
                "to": source_to,
                "partitions": list(partitions),
            },
            Manifest,
        )
        if not manifests:
            raise PlanError("no retained input in the source range for those partitions")
        declared = await one_row(
            conn,
            "generations_backfill_insert",
            {
                "dataset": dataset_name,
                "source_from": source_from,
                "source_to": source_to,
                "definition_version": definition_version,
                "partitions": list(partitions),
                "policy": policy,
                "intent": intent,
                "expected_cost": json.dumps(expected_cost),
                "writes_per_second": writes_per_second,
                "concurrency": concurrency,
                "requested_by": actor,
                "reason": reason,
            },
        )
        run = await plan_run(
            gen,
            conn,
            dataset_name=dataset_name,
            purpose="backfill",
            definition_version=definition_version,
            manifest_ids=[m.id for m in manifests],
            partitions=partitions,
            policy=policy,
            intent=intent,
            requested_by=actor,
            reason=f"backfill {declared['id']}: {reason}",
            backfill_id=declared["id"],
        )
        started = from_row(
            Backfill,
            await one_row(
                conn, "generations_backfill_set_run", {"id": declared["id"], "run_id": run.id}
            ),
        )
        await audit.record(
            conn,
            actor,
            "generations.backfill",
            ("gen_backfill", started.id),
            reason,
            after=started.to_json(),
        )
    return started


async def throttle(gen: Generations, ctx: JobContext, payload: dict[str, Any]) -> None:
    """Take a concurrency slot and a write token of the task's backfill (or snooze)."""
    async with gen.pool(ctx).connection() as conn:
        found = await fetch_one(
            conn, "generations_backfill_of_run", {"run_id": int(payload["run_id"])}, Backfill
        )
    if found is None:
        return
    key = f"generations.backfill:{found.id}"
    await limits.acquire_slot(ctx, key, found.concurrency, retry_after=0.5)
    await limits.acquire(ctx, key, found.writes_per_second, 1.0)


async def progress(conn: AsyncConn, backfill_id: int) -> dict[str, Any]:
    """A backfill, its declaration, and per partition where its task stands: the API's
    JSON document (the backfill's columns, ``partitions_progress``, ``done``, ``total``)."""
    found = await fetch_one(conn, "generations_backfill_get", {"id": backfill_id}, Backfill)
    if found is None:
        raise NotFound(f"no backfill {backfill_id}")
    # A backfill always has its run once declared (both are written in one transaction).
    parts = await records.tasks(conn, found.run_id) if found.run_id is not None else []
    return {
        **found.to_json(),
        "partitions_progress": [
            {"partition": p.partition, "state": p.state, "attempt": p.attempt, "detail": p.detail}
            for p in parts
        ],
        "done": sum(1 for p in parts if not p.state.unsettled),
        "total": len(parts),
    }
