"""Request and response bodies. Inputs are bounded so nothing reaches the database that
PostgreSQL cannot hold (NUL characters, out-of-range integers)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

NAME = r"^[A-Za-z0-9_.:-]{1,200}$"  # kinds and queues, as the registry accepts them
TEXT = r"^[^\x00]+$"  # PostgreSQL text cannot hold NUL
MAX_ID = 2**63 - 1

Name = Annotated[str, Field(pattern=NAME)]
ObjectKey = Annotated[str, Field(min_length=1, max_length=1000, pattern=TEXT)]
Reason = Annotated[str, Field(min_length=1, max_length=2000, pattern=r"^[^\x00]*\S[^\x00]*$")]
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
    run_at: AwareDatetime | None = None
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
    model_config = ConfigDict(extra="allow")

    at: datetime | None = None
    attempt: int | None = None
    kind: str | None = None
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
