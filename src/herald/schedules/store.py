"""Schedule records: create, read, change, pause, resume, delete.

Every function takes an open connection or a pool. Input is validated before anything
is written; a bad field raises :class:`ScheduleError` (a ``ValueError``) and writes
nothing. Manual changes (update, pause, resume, delete) name who made them and why, and
write an audit record in the same transaction as the change.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, time
from typing import Any

from psycopg_pool import AsyncConnectionPool

from herald.db import AsyncConn
from herald.errors import HeraldError
from herald.ops import audit
from herald.payloads import MAX_DEPTH, too_deep
from herald.registry import Herald
from herald.rows import fetch_all, fetch_one, from_row, one_row
from herald.schedules.recurrence import Misfire, Recurrence, RecurrenceError, first_due
from herald.schedules.rows import Schedule, ScheduleFire

Db = AsyncConn | AsyncConnectionPool[AsyncConn]

PAYLOAD_LIMIT = 1_000_000  # bytes of JSON, as the engine's default admission limit


def _first_due(rule: Recurrence, now: datetime) -> datetime:
    """The rule's first slot after ``now``; a rule that never fires is bad input."""
    try:
        return first_due(rule, now)
    except RecurrenceError as exc:
        raise ScheduleError(str(exc)) from None


class ScheduleError(HeraldError, ValueError):
    """A schedule definition or manual change that cannot be accepted."""


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule's definition: the object it enqueues and when.

    ``frequency`` is daily, weekly, monthly or cron; ``at`` the local time of day,
    ``weekday`` ISO (1 = Monday), ``day`` the day of month (short months use their last
    day), ``cron`` a five-field expression, all read in the IANA ``timezone``.
    ``misfire`` says what a late pass does: ``once`` fires one job for all missed slots,
    ``skip`` fires only a slot at most ``misfire_grace`` seconds late, ``all`` fires each
    missed slot, at most ``max_catchup`` per pass.
    """

    kind: str
    key: str
    frequency: str
    timezone: str
    at: time | None = None
    weekday: int | None = None
    day: int | None = None
    cron: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    misfire: str = Misfire.ONCE.value
    misfire_grace: float = 60.0
    max_catchup: int = 10

    @property
    def recurrence(self) -> Recurrence:
        try:
            return Recurrence(
                self.frequency,
                self.timezone,
                at=self.at,
                weekday=self.weekday,
                day=self.day,
                cron=self.cron,
            )
        except RecurrenceError as exc:
            raise ScheduleError(str(exc)) from None

    def validate(self, app: Herald | None = None) -> tuple[Recurrence, str]:
        """Check every field; returns the rule and the payload as JSON."""
        self._check_target(app)
        payload = _payload_json(self.payload)
        self._check_placement()
        self._check_misfire()
        return self.recurrence, payload

    def _check_target(self, app: Herald | None) -> None:
        """The object the schedule enqueues: a registered kind, and a key."""
        if not isinstance(self.kind, str) or not 0 < len(self.kind) <= 200:
            raise ScheduleError("kind must be a non-empty string of at most 200 characters")
        if app is not None:
            app.kind(self.kind)  # UnknownKind names the registered ones
        if not isinstance(self.key, str) or not 0 < len(self.key) <= 1000:
            raise ScheduleError("key must be a non-empty string of at most 1000 characters")

    def _check_placement(self) -> None:
        """The queue and priority its jobs get (None: the kind's)."""
        if self.queue is not None and (
            not isinstance(self.queue, str) or not 0 < len(self.queue) <= 200
        ):
            raise ScheduleError("queue must be a non-empty string of at most 200 characters")
        if self.priority is not None and (
            not isinstance(self.priority, int)
            or isinstance(self.priority, bool)
            or not -32768 <= self.priority <= 32767
        ):
            raise ScheduleError("priority must be an integer between -32768 and 32767")

    def _check_misfire(self) -> None:
        """What a late pass does: the policy, its grace and the catch-up bound."""
        try:
            Misfire(self.misfire)
        except ValueError:
            allowed = ", ".join(m.value for m in Misfire)
            raise ScheduleError(f"misfire must be one of {allowed}, got {self.misfire!r}") from None
        grace = self.misfire_grace
        if not isinstance(grace, int | float) or isinstance(grace, bool) or not 0 <= grace < 1e9:
            raise ScheduleError("misfire_grace must be a non-negative number of seconds")
        catchup = self.max_catchup
        if not isinstance(catchup, int) or isinstance(catchup, bool) or not 1 <= catchup <= 1000:
            raise ScheduleError("max_catchup must be an integer from 1 to 1000")

    def params(self, payload_json: str, next_due_at: datetime) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "payload": payload_json,
            "queue": self.queue,
            "priority": self.priority,
            "frequency": str(self.frequency),
            "timezone": self.timezone,
            "at_time": self.at,
            "weekday": self.weekday,
            "day_of_month": self.day,
            "cron": self.cron,
            "misfire": str(self.misfire),
            "misfire_grace_s": float(self.misfire_grace),
            "max_catchup": self.max_catchup,
            "next_due_at": next_due_at,
        }


# Fields a manual update may change; kind and key name the object and stay fixed.
UPDATABLE = frozenset(f.name for f in fields(ScheduleSpec)) - {"kind", "key"}


def spec_of(row: Schedule) -> ScheduleSpec:
    """The definition a stored schedule holds."""
    return ScheduleSpec(
        kind=row.kind,
        key=row.key,
        frequency=row.frequency,
        timezone=row.timezone,
        at=row.at_time,
        weekday=row.weekday,
        day=row.day_of_month,
        cron=row.cron,
        payload=row.payload,
        queue=row.queue,
        priority=row.priority,
        misfire=row.misfire,
        misfire_grace=row.misfire_grace_s,
        max_catchup=row.max_catchup,
    )


def _payload_json(payload: object) -> str:
    if not isinstance(payload, dict):
        raise ScheduleError(f"payload must be a JSON object, got {type(payload).__name__}")
    if too_deep(payload):
        raise ScheduleError(f"payload nests deeper than {MAX_DEPTH} levels")
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ScheduleError(f"payload is not JSON-serialisable: {exc}") from None
    if "\\u0000" in text:
        raise ScheduleError("payload contains a NUL character, which PostgreSQL cannot hold")
    if len(text.encode()) > PAYLOAD_LIMIT:
        raise ScheduleError(f"payload is over the limit of {PAYLOAD_LIMIT} bytes")
    return text


async def _audit(
    conn: AsyncConn,
    actor: str,
    action: str,
    reason: str,
    schedule_id: int,
    before: Schedule | None,
    after: Schedule | None,
) -> None:
    await audit.record(
        conn,
        actor,
        action,
        ("schedule", schedule_id),
        reason,
        None if before is None else before.snapshot(),
        None if after is None else after.snapshot(),
    )


def _check_id(schedule_id: int) -> None:
    if not isinstance(schedule_id, int) or isinstance(schedule_id, bool) or schedule_id < 1:
        raise ScheduleError(f"schedule id must be a positive integer, got {schedule_id!r}")


def _check_limit(limit: int) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise ScheduleError("limit must be an integer from 1 to 1000")


@asynccontextmanager
async def _connection(db: Db) -> AsyncIterator[AsyncConn]:
    if isinstance(db, AsyncConnectionPool):
        async with db.connection() as conn:
            yield conn
    else:
        yield db


async def _now(conn: AsyncConn) -> datetime:
    now: datetime = (await one_row(conn, "db_now"))["now"]
    return now


async def create_schedule(
    db: Db,
    spec: ScheduleSpec,
    *,
    app: Herald | None = None,
    actor: str | None = None,
    reason: str | None = None,
) -> Schedule:
    """Store a new schedule, first due at its first slot after now.

    With ``app`` the kind must be one the application registers. With ``actor`` and
    ``reason`` (both or neither) the creation is written to the audit log.
    """
    rule, payload = spec.validate(app)
    audited = actor is not None or reason is not None
    if audited:
        actor, reason = audit.require(actor, reason)
    async with _connection(db) as conn, conn.transaction():
        next_due = _first_due(rule, await _now(conn))
        params = spec.params(payload, next_due)
        params["paused"] = False
        row = from_row(Schedule, await one_row(conn, "schedule_insert", params))
        if audited:
            assert actor is not None and reason is not None
            await _audit(conn, actor, "create", reason, row.id, None, row)
    return row


async def get_schedule(db: Db, schedule_id: int) -> Schedule | None:
    _check_id(schedule_id)
    async with _connection(db) as conn:
        return await fetch_one(conn, "schedule_get", {"id": schedule_id}, Schedule)


async def list_schedules(
    db: Db,
    *,
    kind: str | None = None,
    key: str | None = None,
    paused: bool | None = None,
    after_id: int | None = None,
    limit: int = 100,
) -> list[Schedule]:
    """Schedules in id order; page with ``after_id`` (the last id of the previous page)."""
    _check_limit(limit)
    params = {"kind": kind, "key": key, "paused": paused, "after_id": after_id, "limit": limit}
    async with _connection(db) as conn:
        return await fetch_all(conn, "schedule_list", params, Schedule)


async def list_fires(db: Db, schedule_id: int, *, limit: int = 100) -> list[ScheduleFire]:
    """The schedule's fired slots, latest first."""
    _check_id(schedule_id)
    _check_limit(limit)
    async with _connection(db) as conn:
        params = {"schedule_id": schedule_id, "limit": limit}
        return await fetch_all(conn, "schedule_fires", params, ScheduleFire)


async def update_schedule(
    db: Db,
    schedule_id: int,
    *,
    actor: str,
    reason: str,
    app: Herald | None = None,
    **changes: Any,
) -> Schedule | None:
    """Change fields of a schedule (any of ``UPDATABLE``); None if it does not exist.

    A change to the rule or zone re-times the schedule: it is next due at the new rule's
    first slot after now. Other changes keep its next due time.
    """
    _check_id(schedule_id)
    actor, reason = audit.require(actor, reason)
    unknown = set(changes) - UPDATABLE
    if unknown:
        raise ScheduleError(
            f"cannot update {', '.join(sorted(unknown))}; updatable: {', '.join(sorted(UPDATABLE))}"
        )
    async with _connection(db) as conn, conn.transaction():
        before = await fetch_one(conn, "schedule_lock", {"id": schedule_id}, Schedule)
        if before is None:
            return None
        old = spec_of(before)
        new = replace(old, **changes)
        rule, payload = new.validate(app)
        next_due = before.next_due_at
        if rule != old.recurrence:
            next_due = _first_due(rule, await _now(conn))
        params = new.params(payload, next_due)
        params["id"] = schedule_id
        after = await fetch_one(conn, "schedule_update", params, Schedule)
        await _audit(conn, actor, "update", reason, schedule_id, before, after)
        return after


async def _set_paused(
    db: Db, schedule_id: int, paused: bool, actor: str, reason: str
) -> Schedule | None:
    _check_id(schedule_id)
    actor, reason = audit.require(actor, reason)
    async with _connection(db) as conn, conn.transaction():
        before = await fetch_one(conn, "schedule_lock", {"id": schedule_id}, Schedule)
        if before is None:
            return None
        resume_due = _first_due(spec_of(before).recurrence, await _now(conn))
        after = await fetch_one(
            conn,
            "schedule_set_paused",
            {"id": schedule_id, "paused": paused, "resume_due_at": resume_due},
            Schedule,
        )
        action = "pause" if paused else "resume"
        await _audit(conn, actor, action, reason, schedule_id, before, after)
        return after


async def pause_schedule(db: Db, schedule_id: int, *, actor: str, reason: str) -> Schedule | None:
    """Stop firing until resumed; None if the schedule does not exist."""
    return await _set_paused(db, schedule_id, True, actor, reason)


async def resume_schedule(db: Db, schedule_id: int, *, actor: str, reason: str) -> Schedule | None:
    """Fire again from the next slot after now (slots missed while paused are dropped)."""
    return await _set_paused(db, schedule_id, False, actor, reason)


async def delete_schedule(db: Db, schedule_id: int, *, actor: str, reason: str) -> Schedule | None:
    """Delete a schedule and its fire records; returns the deleted row (None if absent)."""
    _check_id(schedule_id)
    actor, reason = audit.require(actor, reason)
    async with _connection(db) as conn, conn.transaction():
        before = await fetch_one(conn, "schedule_delete", {"id": schedule_id}, Schedule)
        if before is not None:
            await _audit(conn, actor, "delete", reason, schedule_id, before, None)
        return before
