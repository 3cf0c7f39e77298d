"""What the generations pages read, through the application's own functions where they
exist (:func:`herald.generations.operator.partition_view`, :func:`~herald.generations.
records.run_status`, :func:`~herald.generations.backfill.progress`) and the console's
statements (``generations_console_*``) for the rest.

Every read takes the caller: what a key may see is narrowed here, in one place.
Quarantined samples (redacted source data) are shown to ``operate`` keys only, as the
HTTP API does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from herald.console import Caller, Missing
from herald.db import AsyncConn
from herald.generations import backfill, operator, quarantine, records
from herald.generations.errors import NotFound
from herald.generations.rows import Backfill, Decision, DeliveryState, Manifest
from herald.generations.shared import Generations, installed
from herald.rows import fetch_all, fetch_one

# Run and task states as the console's badges colour them (badge class, label).
TONES = {
    "queued": "waiting",
    "building": "running",
    "registered": "running",
    "waiting": "paused",
    "published": "published",
    "discarded": "cancelled",
    "rejected": "failed",
    "quarantined": "failed",
    "failed": "failed",
    "dry_run": "not_needed",
    "held": "pending",
    "repaired": "done",
    "replayed": "done",
    "expired": "cancelled",
    "pending": "pending",
    "delivered": "done",
    "running": "running",
    "settled": "done",
    "cancelled": "cancelled",
}


def generations(caller: Caller) -> Generations:
    gens = installed(caller.state.app)
    if gens is None:
        raise Missing("this deployment runs no generations")
    return gens


@asynccontextmanager
async def session(caller: Caller) -> AsyncIterator[tuple[Generations, AsyncConn]]:
    """The application and a connection; a record that is not there answers 404."""
    gens = generations(caller)
    try:
        async with caller.state.client.pool.connection() as conn:
            yield gens, conn
    except NotFound as exc:
        raise Missing(str(exc)) from None


@dataclass(frozen=True)
class DatasetSummary:
    """A dataset as the list of datasets shows it (``generations_console_datasets``)."""

    name: str
    owner: str
    schema_version: int
    created_at: datetime
    published_partitions: int
    running_tasks: int
    waiting_candidates: int
    held: int
    backfills: int


@dataclass(frozen=True)
class PartitionSummary:
    """A partition as its dataset's page lists it (``generations_console_partitions``)."""

    partition: str
    generation: int
    published_at: datetime | None
    change: str | None
    definition_version: str | None
    running_tasks: int
    waiting_candidates: int
    failures: int
    held: int
    late_inputs: int


@dataclass(frozen=True)
class BackfillSummary(Backfill):
    """A backfill with how many of its tasks settled (``generations_console_backfills``)."""

    total: int
    done: int


@dataclass(frozen=True)
class Published:
    """A publication of a partition with its candidate's bytes (``generations_console_history``)."""

    id: int
    publication_id: UUID
    generation: int
    change: str
    supersedes: UUID | None
    run_id: int
    candidate_id: int
    definition_version: str
    manifest_ids: list[int]
    published_by: str
    published_at: datetime
    checksum: str
    row_count: int
    job_id: int
    attempt: int
    fence: int


@dataclass(frozen=True)
class GenerationDetail:
    """One generation with its candidate and run (``generations_console_generation``)."""

    id: int
    publication_id: UUID
    dataset: str
    partition: str
    generation: int
    change: str
    supersedes: UUID | None
    run_id: int
    candidate_id: int
    manifest_ids: list[int]
    definition_version: str
    quality: dict[str, Any]
    published_by: str
    published_at: datetime
    location: str
    checksum: str
    row_count: int
    schema_version: int
    job_id: int
    attempt: int
    fence: int
    worker: str
    lineage: dict[str, Any]
    registered_at: datetime
    purpose: str
    policy: str
    intent: str
    requested_by: str
    run_reason: str
    base_generation: str | None  # as planned, from the run's base_generations (JSON text)
    backfill_id: int | None
    is_current: bool | None  # None: the partition has no pointer


@dataclass(frozen=True)
class PartitionDelivery:
    """A webhook delivery of a partition's event (``generations_console_partition_deliveries``)."""

    id: int
    state: DeliveryState
    attempts: int
    last_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    subscription: str
    url: str
    event_id: UUID
    event_type: str
    created_at: datetime
    generation: str | None  # as the event's payload says it (JSON text)


@dataclass(frozen=True)
class ManualAction:
    """A manual action on a partition's records (``generations_console_partition_audit``)."""

    id: int
    at: datetime
    actor: str
    action: str
    target_type: str
    target_id: str
    reason: str


@dataclass(frozen=True)
class InputUse:
    """A generation an input went into, or a run that declared it
    (``generations_console_manifest_uses``)."""

    kind: str  # "generation" or "run"
    partition: str
    generation: int | None
    at: datetime
    run_id: int
    state: str | None  # a run's task state


async def datasets(caller: Caller) -> list[DatasetSummary]:
    async with session(caller) as (_, conn):
        return await fetch_all(conn, "generations_console_datasets", {}, DatasetSummary)


async def dataset(caller: Caller, name: str) -> dict[str, Any]:
    async with session(caller) as (_, conn):
        found = await records.dataset(conn, name)
        key = {"dataset": name, "partition": None, "limit": 50}
        held = [item.to_json() for item in await quarantine.held_items(conn, name)]
        return {
            "dataset": found,
            "partitions": await fetch_all(
                conn, "generations_console_partitions", key, PartitionSummary
            ),
            "backfills": await fetch_all(
                conn, "generations_console_backfills", key, BackfillSummary
            ),
            "quarantined": _redacted(caller, held),
        }


def _redacted(caller: Caller, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Quarantined samples are source data: shown to ``operate`` keys only."""
    if caller.allows("operate"):
        return items
    return [{**item, "sample": None} for item in items]


async def partition(caller: Caller, name: str, part: str) -> dict[str, Any]:
    """The operator's view of a partition, its history, backfills and deliveries."""
    async with session(caller) as (gens, conn):
        view = await operator.partition_view(gens, conn, name, part)
        key = {"dataset": name, "partition": part, "limit": 50}
        view["history"] = await fetch_all(conn, "generations_console_history", key, Published)
        view["backfills"] = await fetch_all(
            conn, "generations_console_backfills", key, BackfillSummary
        )
        view["deliveries"] = await fetch_all(
            conn, "generations_console_partition_deliveries", key, PartitionDelivery
        )
        view["manual"] = await fetch_all(
            conn, "generations_console_partition_audit", key, ManualAction
        )
    view["quarantined"] = _redacted(caller, view["quarantined"])
    held = {q["manifest_id"]: q["id"] for q in view["quarantined"] if q["manifest_id"]}
    for source in view["late_sources"]:
        if source["id"] in held:  # not accepted input: the view's reason would mislead
            source["why"] = f"held in quarantine (item {held[source['id']]})"
    # A task's last error may carry a traceback: operate keys only, as on a job's page.
    if not caller.allows("operate"):
        view["running_tasks"] = [
            {**t, "last_error": _without_traceback(t["last_error"])} for t in view["running_tasks"]
        ]
    return view


def _without_traceback(error: Any) -> Any:
    if isinstance(error, dict):
        return {k: v for k, v in error.items() if k != "traceback"}
    return error


async def lineage(caller: Caller, name: str, part: str, number: int) -> dict[str, Any]:
    """A generation: its publication, candidate, run, inputs, and its neighbours."""
    async with session(caller) as (_, conn):
        key = {"dataset": name, "partition": part}
        found = await fetch_one(conn, "generations_console_generation",
                                {**key, "generation": number}, GenerationDetail)  # fmt: skip
        if found is None:
            raise Missing(f"{name}/{part} has no generation {number}")
        inputs = await records.manifests(conn, found.manifest_ids)
        history = await fetch_all(
            conn, "generations_console_history", {**key, "limit": 1000}, Published
        )
    generations_of = {row.generation: row for row in history}
    replaced = generations_of.get(number - 1)
    return {
        "generation": found,
        "inputs": inputs,
        "replaced": replaced,
        "replaced_by": generations_of.get(number + 1),
        "dropped": sorted(set(replaced.manifest_ids) - set(found.manifest_ids)) if replaced else [],
        "added": sorted(set(found.manifest_ids) - set(replaced.manifest_ids)) if replaced else [],
    }


async def manifest(caller: Caller, ident: int) -> dict[str, Any]:
    """An input and everything that used it: generations, runs (lineage backwards)."""
    async with session(caller) as (_, conn):
        found = await fetch_one(conn, "generations_console_manifest", {"id": ident}, Manifest)
        if found is None:
            raise Missing(f"input manifest {ident} does not exist")
        params = {"dataset": found.dataset, "id": ident}
        uses = await fetch_all(conn, "generations_console_manifest_uses", params, InputUse)
    return {
        "manifest": found,
        "generations": [u for u in uses if u.kind == "generation"],
        "runs": [u for u in uses if u.kind == "run"],
    }


async def run(caller: Caller, ident: int) -> dict[str, Any]:
    async with session(caller) as (_, conn):
        status = await records.run_status(conn, ident)
        inputs = await records.manifests(conn, status["manifest_ids"])
        decisions = await fetch_all(
            conn, "generations_decisions_of_run", {"run_id": ident}, Decision
        )
    return {"run": status, "inputs": inputs, "decisions": decisions}


async def backfill_progress(caller: Caller, ident: int) -> dict[str, Any]:
    async with session(caller) as (_, conn):
        return await backfill.progress(conn, ident)
