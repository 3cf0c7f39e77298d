"""Declaring the records: datasets, input manifests and runs (with their tasks)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from herald import sql
from herald.db import AsyncConn
from herald.generations.errors import NotFound, PlanError
from herald.generations.rows import Current, Dataset, Manifest, Run, TaskProgress, TaskState
from herald.generations.rules import POLICIES
from herald.generations.store import raw_location
from herald.rows import fetch_all, fetch_one, from_row, one_row

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


async def execute(conn: AsyncConn, name: str, params: Mapping[str, Any]) -> None:
    """Run a statement whose answer, if any, the caller does not need."""
    await conn.execute(sql.query(name), dict(params))


async def register_dataset(conn: AsyncConn, spec: DatasetSpec) -> Dataset:
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
    return from_row(Dataset, row)


async def dataset(conn: AsyncConn, name: str) -> Dataset:
    found = await fetch_one(conn, "generations_dataset_get", {"name": name}, Dataset)
    if found is None:
        raise NotFound(f"no generations dataset {name!r}")
    return found


async def manifests(conn: AsyncConn, ids: Sequence[int]) -> list[Manifest]:
    """The input manifests of these ids, oldest first (those that exist)."""
    return await fetch_all(conn, "generations_manifests_get", {"ids": list(ids)}, Manifest)


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
) -> Manifest:
    """Land raw input write-once and record its manifest (evidence of what arrived)."""
    await dataset(conn, dataset_name)
    location = raw_location(dataset_name, name)
    digest = gen.store.write_once(location, data)
    row = await one_row(
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
    return from_row(Manifest, row)


async def current(conn: AsyncConn, dataset_name: str, partition: str) -> Current | None:
    """What readers of the partition see; None when it has no pointer yet."""
    key = {"dataset": dataset_name, "partition": partition}
    return await fetch_one(conn, "generations_current_get", key, Current)


async def current_generation(conn: AsyncConn, dataset_name: str, partition: str) -> int:
    found = await current(conn, dataset_name, partition)
    return 0 if found is None else found.generation


async def run(conn: AsyncConn, run_id: int) -> Run | None:
    return await fetch_one(conn, "generations_run_get", {"id": run_id}, Run)


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
) -> Run:
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
    found = await manifests(conn, manifest_ids)
    if len(found) != len(set(manifest_ids)) or any(m.dataset != dataset_name for m in found):
        raise PlanError("every input manifest must exist and belong to the dataset")
    bases = dict(base_generations or {})
    for partition in partitions:
        if partition not in bases:
            bases[partition] = await current_generation(conn, dataset_name, partition)
    async with conn.transaction():
        declared = await _insert_run(
            conn,
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
                {"run_id": declared.id, "partition": partition},
                key=f"run:{declared.id}:{partition}",
                conn=conn,
            )
            await execute(
                conn,
                "generations_run_partition_insert",
                {"run_id": declared.id, "partition": partition, "job_id": job.id},
            )
    return declared


async def _insert_run(conn: AsyncConn, params: Mapping[str, Any]) -> Run:
    return from_row(Run, await one_row(conn, "generations_run_insert", params))


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
) -> Run:
    """Declare a one-partition run whose task is a job the caller already has (an
    application's own pipeline, e.g. a catalog publication) and which reads a live
    source instead of input manifests. Planned against the partition's current
    generation; policy ``discard``: it never replaces a generation planned after it."""
    base = await current_generation(conn, dataset_name, partition)
    async with conn.transaction():
        declared = await _insert_run(
            conn,
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
        await execute(
            conn,
            "generations_run_partition_insert",
            {"run_id": declared.id, "partition": partition, "job_id": job_id},
        )
    return declared


async def settle_failed(conn: AsyncConn, run_id: int, partition: str, detail: str) -> None:
    """Settle a run's partition whose task failed for good (nothing was registered)."""
    await execute(
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
    await execute(conn, "generations_run_settle", {"run_id": run_id})


async def tasks(conn: AsyncConn, run_id: int) -> list[TaskProgress]:
    """Every task of a run, by partition."""
    return await fetch_all(conn, "generations_run_partitions", {"run_id": run_id}, TaskProgress)


async def run_status(conn: AsyncConn, run_id: int) -> dict[str, Any]:
    """A run and, per partition, where its task stands (what a producer asks): the API's
    JSON document, the run's columns and ``partitions_detail``."""
    found = await run(conn, run_id)
    if found is None:
        raise NotFound(f"no run {run_id}")
    detail = [
        {**t.to_json(), "status": producer_status(t.state)} for t in await tasks(conn, run_id)
    ]
    return {**found.to_json(), "partitions_detail": detail}


def producer_status(state: TaskState) -> str:
    """The four answers a producer needs: rejected, accepted, delayed or completed."""
    if state.failed:
        return "rejected"
    if state.unsettled:
        return "accepted"
    if state is TaskState.WAITING:
        return "delayed"
    return "completed"  # published, discarded (with its reason), dry_run


async def authoritative(conn: AsyncConn, dataset_name: str, partition: str) -> dict[str, Any]:
    """What a consumer needs to trust a partition: the current generation's publication
    id, its inputs (with their checksums and sources), definition version, quality, and
    where its immutable bytes are, with their checksum. The API's JSON document."""
    found = await current(conn, dataset_name, partition)
    if found is None or found.generation == 0:
        raise NotFound(f"{dataset_name}/{partition} has no published generation")
    inputs = [
        {
            "id": m.id,
            "source": m.source,
            "owner": m.owner,
            "checksum": m.checksum,
            "record_count": m.record_count,
            "event_time_from": m.event_time_from,
            "event_time_to": m.event_time_to,
            "received_at": m.received_at,
        }
        for m in await manifests(conn, found.manifest_ids or [])
    ]
    return {**found.to_json(), "inputs": inputs}
