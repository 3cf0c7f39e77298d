"""Request and response bodies. Inputs are bounded so nothing reaches the database that
PostgreSQL cannot hold (NUL characters, out-of-range integers)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

NAME = r"^[A-Za-z0-9_.:-]{1,200}$"  # kinds and queues, as the registry accepts them
TEXT = r"^[^\x00]+$"  # PostgreSQL text cannot hold NUL
MAX_ID = 2**63 - 1

Name = Annotated[str, Field(pattern=NAME)]
ObjectKey = Annotated[str, Field(min_length=1, max_length=1000, pattern=TEXT)]
Reason = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00]*\S[^\x00]*$")]
_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(9999, 1, 1, tzinfo=UTC)


def _storable(value: datetime) -> datetime:
    # Outside these bounds a time shifted to UTC may leave the range PostgreSQL and
    # Python share (year 1 to 9999), and the job could not be read back.
    if not _EARLIEST <= value <= _LATEST:
        raise ValueError("must lie between 1970-01-01 and 9999-01-01 (UTC)")
    return value


RunAt = Annotated[AwareDatetime, AfterValidator(_storable)]
State = Literal["waiting", "running", "succeeded", "dead", "cancelled"]

# Parameters of paths and query strings.
IdPath = Annotated[int, Path(ge=1, le=MAX_ID)]
NameQuery = Annotated[str | None, Query(pattern=NAME)]
KeyQuery = Annotated[str | None, Query(min_length=1, max_length=1000, pattern=TEXT)]
LimitQuery = Annotated[int, Query(ge=1, le=1000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobIn(Strict):
    kind: Name
    payload: dict[str, Any] = Field(default_factory=dict)
    key: ObjectKey | None = None
    run_at: RunAt | None = None
    priority: Annotated[int, Field(ge=-32768, le=32767)] | None = None


class EnqueuedOut(BaseModel):
    id: int
    version: int
    outcome: Literal["created", "in_progress", "replay"]
    status_url: str


class ActionIn(Strict):
    """Every manual action names why it is taken; the API key names who takes it."""

    reason: Reason


class JobError(BaseModel):
    """What a caller sees of one failure: never its traceback (that stays in the logs)."""

    model_config = ConfigDict(extra="ignore")

    at: datetime | None = None
    attempt: int | None = None
    kind: str | None = None
    type: str | None = None
    message: str | None = None


class JobHistory(BaseModel):
    created_at: datetime
    run_at: datetime
    attempted_at: datetime | None
    finished_at: datetime | None
    errors: list[JobError]


class JobOut(BaseModel):
    id: int
    kind: str
    queue: str
    key: str | None
    version: int
    state: State
    step: str | None
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime
    payload: dict[str, Any]
    checkpoint: dict[str, Any] | None
    result: Any = None
    errors: list[JobError]
    snoozes: int
    rescues: int
    replay_of: int | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    history: JobHistory


class JobSummary(BaseModel):
    id: int
    kind: str
    queue: str
    key: str | None
    version: int
    state: State
    step: str | None
    attempt: int
    max_attempts: int
    priority: int
    run_at: datetime
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None


class QueueOut(BaseModel):
    queue: str
    available: int
    scheduled: int
    running: int
    oldest_waiting_s: float | None
