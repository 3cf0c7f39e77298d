"""The generations' records as typed rows, and the states their ``state`` columns hold.

Each class is built from the named statements' rows by :func:`herald.rows.from_row`. A
class read with ``SELECT *`` (or ``RETURNING *``) names every column of its table, in
the table's order, ``tenant_id`` included: :meth:`Record.to_json` then gives what the
row gave as a dict, so the API answers and the audit log keep their shape.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar
from uuid import UUID


class RunState(StrEnum):
    RUNNING = "running"
    SETTLED = "settled"
    CANCELLED = "cancelled"


class TaskState(StrEnum):
    """Where a run's task for one partition stands (``gen_run_partitions.state``)."""

    QUEUED = "queued"
    BUILDING = "building"
    WAITING = "waiting"
    PUBLISHED = "published"
    DISCARDED = "discarded"
    REJECTED = "rejected"
    QUARANTINED = "quarantined"
    FAILED = "failed"
    DRY_RUN = "dry_run"

    @property
    def unsettled(self) -> bool:
        """No candidate yet: the task is still queued or building."""
        return self in (TaskState.QUEUED, TaskState.BUILDING)

    @property
    def failed(self) -> bool:
        """Ended without a candidate for a reason an operator may act on (retry)."""
        return self in (TaskState.REJECTED, TaskState.QUARANTINED, TaskState.FAILED)


class CandidateState(StrEnum):
    REGISTERED = "registered"
    WAITING = "waiting"
    PUBLISHED = "published"
    DISCARDED = "discarded"
    REJECTED = "rejected"
    DRY_RUN = "dry_run"


class QuarantineState(StrEnum):
    HELD = "held"
    REPAIRED = "repaired"
    REPLAYED = "replayed"
    DISCARDED = "discarded"
    EXPIRED = "expired"


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class Record:
    """A typed row that can say itself as the dict it was read from (every subclass is a
    frozen dataclass)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_json(self) -> dict[str, Any]:
        """The row as a mapping of its columns (for an API body or an audit record)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Dataset(Record):
    """A generations dataset (``gen_datasets``)."""

    name: str
    owner: str
    schema_version: int
    fields: list[str]
    min_rows: int
    max_rows: int | None
    quality_rules: dict[str, Any]
    raw_retention: timedelta
    quarantine_cap: int
    quarantine_ttl: timedelta
    redacted_fields: list[str]
    created_at: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class Manifest(Record):
    """An input manifest (``gen_input_manifests``): evidence of what a source delivered."""

    id: int
    dataset: str
    source: str
    owner: str
    schema_version: int
    location: str
    checksum: str
    event_time_from: datetime
    event_time_to: datetime
    record_count: int
    partitions: list[str]
    received_at: datetime
    retain_until: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class Run(Record):
    """A declared run (``gen_runs``)."""

    id: int
    dataset: str
    purpose: str
    definition_version: str
    manifest_ids: list[int]
    partitions: list[str]
    intent: str
    policy: str
    base_generations: dict[str, int]
    state: RunState
    requested_by: str
    reason: str
    backfill_id: int | None
    rebased_from: int | None
    created_at: datetime
    settled_at: datetime | None
    tenant_id: str
    live_source: dict[str, Any] | None

    def base_of(self, partition: str) -> int:
        """The generation of ``partition`` the run was planned against (0: none yet)."""
        return int(self.base_generations.get(partition, 0))


@dataclasses.dataclass(frozen=True)
class RunPartition(Record):
    """A run's task for one partition (``gen_run_partitions``)."""

    run_id: int
    partition: str
    job_id: int | None
    state: TaskState
    candidate_id: int | None
    detail: str | None
    updated_at: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class TaskProgress(RunPartition):
    """A run's task with its job's attempt, fence and lease (``generations_run_partitions``)."""

    job_state: str | None
    attempt: int | None
    fence: int | None
    lease_owner: str | None
    lease_expires_at: datetime | None


@dataclasses.dataclass(frozen=True)
class Task(RunPartition):
    """A run's task with its run's dataset (``generations_run_partition_get``)."""

    dataset: str


@dataclasses.dataclass(frozen=True)
class Candidate(Record):
    """One attempt's registered output (``gen_candidates``)."""

    id: int
    run_id: int
    dataset: str
    partition: str
    job_id: int
    attempt: int
    fence: int
    worker: str
    location: str
    checksum: str
    row_count: int
    schema_version: int
    quality: dict[str, Any]
    lineage: dict[str, Any]
    state: CandidateState
    registered_at: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class CandidateDecided(Candidate):
    """A candidate with its run's terms and the coordinator's last word on it
    (``generations_candidates_of_partition``; no decision yet: those are None)."""

    purpose: str
    policy: str
    intent: str
    definition_version: str
    manifest_ids: list[int]
    base_generation: str | None  # as planned, from the run's base_generations (JSON text)
    decision: str | None
    reason_code: str | None
    reason: str | None
    generation: int | None
    decided_at: datetime | None


@dataclasses.dataclass(frozen=True)
class Publication(Record):
    """A published generation (``gen_publications``)."""

    id: int
    publication_id: UUID
    dataset: str
    partition: str
    generation: int
    candidate_id: int
    run_id: int
    manifest_ids: list[int]
    definition_version: str
    quality: dict[str, Any]
    change: str
    supersedes: UUID | None
    published_by: str
    published_at: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class Current(Record):
    """What readers of a partition see (``generations_current_get``); generation 0 and
    no publication when nothing was published yet."""

    dataset: str
    partition: str
    generation: int
    updated_at: datetime
    publication_id: UUID | None
    candidate_id: int | None
    manifest_ids: list[int] | None
    definition_version: str | None
    run_id: int | None
    quality: dict[str, Any] | None
    change: str | None
    published_at: datetime | None
    location: str | None
    checksum: str | None
    row_count: int | None


@dataclasses.dataclass(frozen=True)
class Decision(Record):
    """A choice of the coordinator or an operator, with its reason (``gen_decisions``)."""

    id: int
    dataset: str
    partition: str
    run_id: int | None
    candidate_id: int | None
    job_id: int | None
    fence: int | None
    decision: str
    reason_code: str
    reason: str
    base_generation: int | None
    current_generation: int | None
    generation: int | None
    actor: str
    decided_at: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class QuarantineItem(Record):
    """Input held in quarantine (``gen_quarantine``)."""

    id: int
    dataset: str
    manifest_id: int | None
    run_id: int | None
    partition: str | None
    owner: str
    reason_code: str
    detail: str
    sample: dict[str, Any] | None
    redacted_fields: list[str]
    state: QuarantineState
    quarantined_at: datetime
    expires_at: datetime
    resolved_by: str | None
    resolution: str | None
    resolved_at: datetime | None
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class Backfill(Record):
    """Declared corrective work (``gen_backfills``)."""

    id: int
    dataset: str
    source_from: datetime
    source_to: datetime
    definition_version: str
    partitions: list[str]
    policy: str
    intent: str
    expected_cost: dict[str, Any]
    writes_per_second: float
    concurrency: int
    run_id: int | None
    requested_by: str
    reason: str
    created_at: datetime
    tenant_id: str


@dataclasses.dataclass(frozen=True)
class Subscription(Record):
    """A webhook subscription as created (never its secret)."""

    id: int
    name: str
    url: str
    datasets: list[str]
    active: bool
    created_by: str
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class FeedEvent(Record):
    """An outbox event as the consumers' feed gives it (``generations_feed``)."""

    position: int
    event_id: UUID
    publication_id: UUID
    dataset: str
    event_type: str
    payload: dict[str, Any]
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class Delivery(Record):
    """A webhook delivery with what sending it needs (``generations_delivery_get``)."""

    id: int
    state: DeliveryState
    subscription: str
    url: str
    secret: str
    event_id: UUID
    event_type: str
    payload: dict[str, Any]
    created_at: datetime


@dataclasses.dataclass(frozen=True)
class DeliveryListed(Record):
    """A delivery as the list of deliveries shows it (``generations_deliveries_list``)."""

    id: int
    state: DeliveryState
    attempts: int
    last_status: int | None
    last_error: str | None
    delivered_at: datetime | None
    subscription: str
    event_id: UUID
    event_type: str
    publication_id: UUID
