"""Declaring the records: datasets, input manifests and runs (with their tasks)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from herald import sql
from herald.db import AsyncConn, Row
from herald.generations.errors import NotFound, PlanError
from herald.generations.rules import POLICIES
from herald.generations.store import raw_location
from herald.rows import all_rows, one_row

if TYPE_CHECKING:
    from herald.generations.shared import Generations

PURPOSES = ("scheduled", "repair", "backfill")
INTENTS = ("publish", "dry_run")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    owner: str
    fields: tuple[str, ...]
    schema_version: int = 1
    min_rows: int = 0
    max_rows: int | None = None
    quality_rules: dict[str, Any] = field(default_factory=dict)
    raw_retention_s: float = 90 * 86400
    quarantine_cap: int = 1000
    quarantine_ttl_s: float = 14 * 86400
    redacted_fields: tuple[str, ...] = ()


async def one(conn: AsyncConn, name: str, params: dict[str, Any]) -> Row | None:
    """The statement's first row; None when there is none or it answers no rows at all
    (a statement without RETURNING)."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql.query(name), params)
    if cur.description is None:
        return None
    return await cur.fetchone()


async def rows(conn: AsyncConn, name: str, params: dict[str, Any]) -> list[Row]:
    return await all_rows(conn, name, params)


async def register_dataset(conn: AsyncConn, spec: DatasetSpec) -> Row:
    row = await one_row(
        conn,
        "generations_dataset_upsert",
        {
            "name": spec.name,
            "owner": spec.owner,
            "schema_version": spec.schema_version,
            "fields": list(spec.fields),
            "min_rows": spec.min_rows,
            "max_rows": spec.max_rows,
            "quality_rules": json.dumps(spec.quality_rules),
            "raw_retention_s": spec.raw_retention_s,
            "quarantine_cap": spec.quarantine_cap,
            "quarantine_ttl_s": spec.quarantine_ttl_s,
            "redacted_fields": list(spec.redacted_fields),
        },
    )
    return row


async def dataset(conn: AsyncConn, name: str) -> Row:
    row = await one(conn, "generations_dataset_get", {"name": name})
    if row is None:
        raise NotFound(f"no generations dataset {name!r}")
    return row


async def receive_input(
    gen: Generations,
    conn: AsyncConn,
    *,
    dataset_name: str,
    source: str,
    owner: str,
    name: str,
    data: bytes,
    schema_version: int,
    event_time_from: datetime,
    event_time_to: datetime,
    record_count: int,
    partitions: Sequence[str],
) -> Row:
    """Land raw input write-once and record its manifest (evidence of what arrived)."""
    await dataset(conn, dataset_name)
    location = raw_location(dataset_name, name)
    digest = gen.store.write_once(location, data)
    return await one_row(
        conn,
        "generations_manifest_insert",
        {
            "dataset": dataset_name,
            "source": source,
            "owner": owner,
            "schema_version": schema_version,
            "location": location,
            "checksum": digest,
            "event_time_from": event_time_from,
            "event_time_to": event_time_to,
            "record_count": record_count,
            "partitions": list(partitions),
        },
    )


async def current_generation(conn: AsyncConn, dataset_name: str, partition: str) -> int:
    row = await one(
        conn, "generations_current_get", {"dataset": dataset_name, "partition": partition}
    )
    return 0 if row is None else int(row["generation"])


async def plan_run(
    gen: Generations,
    conn: AsyncConn,
    *,
    dataset_name: str,
    purpose: str,
    definition_version: str,
    manifest_ids: Sequence[int],
    partitions: Sequence[str],
    policy: str,
    requested_by: str,
    reason: str,
    intent: str = "publish",
    base_generations: dict[str, int] | None = None,
    run_id: int | None = None,
    backfill_id: int | None = None,
    rebased_from: int | None = None,
) -> Row:
    """Declare a run and enqueue one task per partition, in the caller's transaction.

    The base generation of each partition is the current one unless given: the run is
    planned against what readers see now.
    """
    if purpose not in PURPOSES:
        raise PlanError(f"purpose must be one of {', '.join(PURPOSES)}")
    if intent not in INTENTS:
        raise PlanError(f"intent must be one of {', '.join(INTENTS)}")
    if policy not in POLICIES:
        raise PlanError(f"policy must be one of {', '.join(POLICIES)}")
    if not partitions or len(set(partitions)) != len(partitions):
        raise PlanError("a run needs one or more distinct partitions")
    if gen.definitions.get(dataset_name, definition_version) is None:
        raise PlanError(f"no definition {definition_version!r} of dataset {dataset_name!r}")
    found = await rows(conn, "generations_manifests_get", {"ids": list(manifest_ids)})
    if len(found) != len(set(manifest_ids)) or any(m["dataset"] != dataset_name for m in found):
        raise PlanError("every input manifest must exist and belong to the dataset")
    bases = dict(base_generations or {})
    for partition in partitions:
        if partition not in bases:
            bases[partition] = await current_generation(conn, dataset_name, partition)
    async with conn.transaction():
        run = await one_row(
            conn,
            "generations_run_insert",
            {
                "id": run_id,
                "dataset": dataset_name,
                "purpose": purpose,
                "definition_version": definition_version,
                "manifest_ids": sorted(set(manifest_ids)),
                "partitions": list(partitions),
                "intent": intent,
                "policy": policy,
                "base_generations": json.dumps(bases),
                "requested_by": requested_by,
                "reason": reason,
                "backfill_id": backfill_id,
                "rebased_from": rebased_from,
                "live_source": None,
            },
        )
        for partition in partitions:
            job = await gen.admitter.enqueue(
                gen.build_kind(purpose),
                {"run_id": run["id"], "partition": partition},
                key=f"run:{run['id']}:{partition}",
                conn=conn,
            )
            await one(
                conn,
                "generations_run_partition_insert",
                {"run_id": run["id"], "partition": partition, "job_id": job.id},
            )
    return run


async def declare_live_run(
    conn: AsyncConn,
    *,
    dataset_name: str,
    partition: str,
    definition_version: str,
    live_source: dict[str, Any],
    job_id: int,
    requested_by: str,
    reason: str,
) -> Row:
    """Declare a one-partition run whose task is a job the caller already has (an
    application's own pipeline, e.g. a catalog publication) and which reads a live
    source instead of input manifests. Planned against the partition's current
    generation; policy ``discard``: it never replaces a generation planned after it."""
    base = await current_generation(conn, dataset_name, partition)
    async with conn.transaction():
        run = await one_row(
            conn,
            "generations_run_insert",
            {
                "id": None,
                "dataset": dataset_name,
                "purpose": "scheduled",
                "definition_version": definition_version,
                "manifest_ids": [],
                "partitions": [partition],
                "intent": "publish",
                "policy": "discard",
                "base_generations": json.dumps({partition: base}),
                "requested_by": requested_by,
                "reason": reason,
                "backfill_id": None,
                "rebased_from": None,
                "live_source": json.dumps(live_source),
            },
        )
        await one(
            conn,
            "generations_run_partition_insert",
            {"run_id": run["id"], "partition": partition, "job_id": job_id},
        )
    return run


async def settle_failed(conn: AsyncConn, run_id: int, partition: str, detail: str) -> None:
    """Settle a run's partition whose task failed for good (nothing was registered)."""
    await one(
        conn,
        "generations_run_partition_set",
        {
            "run_id": run_id,
            "partition": partition,
            "state": "failed",
            "detail": detail,
            "candidate_id": None,
        },
    )
    await one(conn, "generations_run_settle", {"run_id": run_id})


async def run_status(conn: AsyncConn, run_id: int) -> Row:
    """A run and, per partition, where its task stands (what a producer asks)."""
    run = await one(conn, "generations_run_get", {"id": run_id})
    if run is None:
        raise NotFound(f"no run {run_id}")
    parts = await rows(conn, "generations_run_partitions", {"run_id": run_id})
    run["partitions_detail"] = [{**p, "status": producer_status(p["state"])} for p in parts]
    return run


def producer_status(state: str) -> str:
    """The four answers a producer needs: rejected, accepted, delayed or completed."""
    if state in ("rejected", "quarantined", "failed"):
        return "rejected"
    if state in ("queued", "building"):
        return "accepted"
    if state == "waiting":
        return "delayed"
    return "completed"  # published, discarded (with its reason), dry_run


async def authoritative(conn: AsyncConn, dataset_name: str, partition: str) -> Row:
    """What a consumer needs to trust a partition: the current generation's publication
    id, its inputs (with their checksums and sources), definition version, quality, and
    where its immutable bytes are, with their checksum."""
    current = await one(
        conn, "generations_current_get", {"dataset": dataset_name, "partition": partition}
    )
    if current is None or current["generation"] == 0:
        raise NotFound(f"{dataset_name}/{partition} has no published generation")
    inputs = await rows(conn, "generations_manifests_get", {"ids": current["manifest_ids"]})
    current["inputs"] = [
        {
            k: m[k]
            for k in (
                "id",
                "source",
                "owner",
                "checksum",
                "record_count",
                "event_time_from",
                "event_time_to",
                "received_at",
            )
        }
        for m in inputs
    ]
    return current
