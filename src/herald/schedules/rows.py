"""The rows the schedule statements answer, typed (see :mod:`herald.rows`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from herald.client import Outcome
from herald.rows import to_dict
from herald.schedules.recurrence import Frequency, Misfire


@dataclass(frozen=True)
class Schedule:
    """A stored schedule (``SELECT *`` of ``schedules``, fields in column order)."""

    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    queue: str | None
    priority: int | None
    frequency: Frequency
    timezone: str
    at_time: time | None
    weekday: int | None
    day_of_month: int | None
    cron: str | None
    misfire: Misfire
    misfire_grace_s: float
    max_catchup: int
    paused: bool
    next_due_at: datetime
    last_slot: datetime | None
    last_fired_at: datetime | None
    last_job_id: int | None
    last_outcome: Outcome | None
    last_error: str | None
    fired_count: int
    coalesced_count: int
    last_coalesced: int
    skipped_count: int
    failed_count: int
    created_at: datetime
    updated_at: datetime
    tenant_id: str

    def to_json(self) -> dict[str, Any]:
        """Every column by name, as the API answers a schedule."""
        return to_dict(self)

    def snapshot(self) -> dict[str, Any]:
        """The schedule as audit JSON (times of day as ISO text)."""
        return {k: v.isoformat() if isinstance(v, time) else v for k, v in self.to_json().items()}


@dataclass(frozen=True)
class DueSchedule(Schedule):
    """A schedule the scheduler took to fire, with the database's ``now`` of the take."""

    now: datetime


@dataclass(frozen=True)
class ScheduleFire:
    """One slot a schedule fired (``schedule_fires``)."""

    id: int
    schedule_id: int
    slot: datetime
    fired_at: datetime
    job_id: int | None
    outcome: Outcome | None
    coalesced: int


@dataclass(frozen=True)
class FireClaim:
    """A (schedule, slot) fire this tick claimed before enqueuing its job."""

    id: int
    schedule_id: int
    slot: datetime
