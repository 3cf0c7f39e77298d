"""Dead letters: list, inspect, replay, discard.

A dead letter is the record of a job that failed for good, written in the same
statement that made the job dead. It stays until an operator discards it or the bounds
of :mod:`herald.ops.dead_bounds` (retention, cap) drop it; replaying it creates a new job
and leaves the record (and its pending cleanup) in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from herald import sql
from herald.client import Client, Outcome
from herald.db import AsyncConn
from herald.ops import audit, dead_bounds
from herald.ops.conn import Source, connection
from herald.ops.errors import ActiveJobExists, Conflict, NotFound
from herald.rows import DeadJob, fetch_all, fetch_one, to_dict
from herald.states import JobState


class CleanupState(StrEnum):
    """Where a dead letter's cleanup (its kind's compensation hook) stands."""

    PENDING = "pending"
    DONE = "done"
    NOT_NEEDED = "not_needed"


CLEANUP_STATES = tuple(state.value for state in CleanupState)


@dataclass(frozen=True)
class ListedDeadLetter(DeadJob):
    """A dead letter as a listing shows it (``ops_dead_list``): the client's columns and
    where its cleanup and replay stand."""

    cleanup_state: CleanupState
    cleanup_attempts: int
    cleanup_last_error: str | None
    cleanup_next_at: datetime | None
    replayed_job_id: int | None


@dataclass(frozen=True)
class DeadLetterRecord:
    """A dead letter's whole record (``ops_dead_lock``): what a discard removes."""

    id: int
    job_id: int
    kind: str
    queue: str
    key: str | None
    version: int
    payload: dict[str, Any]
    attempt: int
    step: str | None
    cleanup: Any  # what the kind's compensation needs to undo (a JSON document)
    errors: list[dict[str, Any]]
    reason: str
    created_at: datetime
    cleanup_state: CleanupState
    cleanup_attempts: int
    cleanup_last_error: str | None
    cleanup_next_at: datetime | None
    cleanup_done_at: datetime | None
    replayed_job_id: int | None


@dataclass(frozen=True)
class DeadLetter(DeadLetterRecord):
    """A dead letter in full (``ops_dead_get``), with its job's state (None once the job
    was pruned)."""

    job_state: JobState | None


@dataclass(frozen=True)
class Replayed:
    """The job a replay created (``created``), or the one an earlier replay created."""

    dead_letter_id: int
    original_job_id: int
    job_id: int
    version: int | None  # None only if the earlier replay's job was pruned since
    created: bool = True


async def list_dead(
    conn: Source,
    *,
    kind: str | None = None,
    queue: str | None = None,
    key: str | None = None,
    error: str | None = None,
    cleanup_state: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[ListedDeadLetter]:
    """Dead letters, newest first, with their cleanup state.

    ``error`` matches a case-insensitive fragment of any recorded error message. Pass
    the last id seen as ``before_id`` for the next page.
    """
    if not 1 <= limit <= 1000:
        raise ValueError("limit must be between 1 and 1000")
    if cleanup_state is not None and cleanup_state not in CLEANUP_STATES:
        raise ValueError(f"cleanup_state must be one of {', '.join(CLEANUP_STATES)}")
    async with connection(conn) as c:
        return await fetch_all(
            c,
            "ops_dead_list",
            {
                "kind": kind,
                "queue": queue,
                "key": key,
                "error": error or None,
                "cleanup_state": cleanup_state,
                "before_id": before_id,
                "limit": limit,
            },
            ListedDeadLetter,
        )


async def get(conn: Source, dead_letter_id: int) -> DeadLetter:
    """One dead letter in full: payload, errors, what needs cleaning up, cleanup state,
    the newest replay, and the original job's state (None once the job was pruned)."""
    async with connection(conn) as c:
        row = await fetch_one(c, "ops_dead_get", {"id": dead_letter_id}, DeadLetter)
    if row is None:
        raise NotFound("dead letter", dead_letter_id)
    return row


async def _locked(conn: AsyncConn, dead_letter_id: int) -> DeadLetterRecord:
    row = await fetch_one(conn, "ops_dead_lock", {"id": dead_letter_id}, DeadLetterRecord)
    if row is None:
        raise NotFound("dead letter", dead_letter_id)
    return row


async def replay(
    client: Client,
    dead_letter_id: int,
    *,
    actor: str,
    reason: str,
    conn: AsyncConn | None = None,
) -> Replayed:
    """Enqueue the dead job again as a new job with a fresh attempt budget.

    The new job has the same kind, queue, key and payload, the kind's current attempt
    budget and priority, the next version of its object, and ``replay_of`` pointing at
    the original job. If the object already has an active job, nothing is written and
    :class:`ActiveJobExists` says which job is in progress. A dead letter is replayed
    once: replaying it again writes nothing and answers the job of its first replay
    (``created`` False); if that job fails too, its own dead letter is the one to replay.
    """
    actor, reason = audit.require(actor, reason)
    if conn is None:
        async with client.pool.connection() as own:
            return await _replay(client, own, dead_letter_id, actor, reason)
    return await _replay(client, conn, dead_letter_id, actor, reason)


async def _replay(
    client: Client, conn: AsyncConn, dead_letter_id: int, actor: str, reason: str
) -> Replayed:
    async with conn.transaction():
        dead = await _locked(conn, dead_letter_id)  # a second replay waits for the first
        if dead.replayed_job_id is not None:
            earlier = await client.get_job(dead.replayed_job_id)
            return Replayed(
                dead_letter_id,
                dead.job_id,
                dead.replayed_job_id,
                earlier.version if earlier is not None else None,
                created=False,
            )
        redacted = dead_bounds.redacted_fields(dead.payload)
        if redacted:
            raise Conflict(
                f"dead letter {dead_letter_id} had fields redacted ({', '.join(redacted)}): "
                "it cannot be replayed as it was; submit the job again with its real values"
            )
        admitted = await client.enqueue(
            dead.kind,
            dead.payload,
            key=dead.key,
            queue=dead.queue,
            conn=conn,
            replay_of=dead.job_id,
        )
        if admitted.outcome is Outcome.IN_PROGRESS:
            raise ActiveJobExists(dead.kind, dead.key, admitted.id, admitted.version)
        await conn.execute(
            sql.query("ops_dead_mark_replayed"), {"id": dead_letter_id, "job_id": admitted.id}
        )
        before = _summary(dead)
        after = {**before, "replayed_job_id": admitted.id, "replay_version": admitted.version}
        await audit.record(
            conn, actor, "replay", ("dead_letter", dead_letter_id), reason, before, after
        )
    return Replayed(dead_letter_id, dead.job_id, admitted.id, admitted.version)


async def discard(
    conn: Source, dead_letter_id: int, *, actor: str, reason: str, force: bool = False
) -> DeadLetterRecord:
    """Remove a dead letter; the audit record keeps it in full (its ``before``).

    A dead letter whose cleanup is still pending would take that cleanup with it, so it
    is refused with :class:`Conflict` unless ``force`` is given (the audit record then
    says the cleanup was abandoned). Returns the removed record.
    """
    actor, reason = audit.require(actor, reason)
    async with connection(conn) as c, c.transaction():
        dead = await _locked(c, dead_letter_id)
        if dead.cleanup_state is CleanupState.PENDING and not force:
            raise Conflict(
                f"dead letter {dead_letter_id} still has a pending cleanup "
                f"({dead.cleanup_attempts} attempts so far); wait for it, or discard with "
                "force to abandon the cleanup"
            )
        await c.execute(sql.query("ops_dead_discard"), {"id": dead_letter_id})
        after: dict[str, Any] | None = None
        if dead.cleanup_state is CleanupState.PENDING:
            after = {"cleanup_abandoned": True}
        await audit.record(
            c, actor, "discard", ("dead_letter", dead_letter_id), reason, to_dict(dead), after
        )
    return dead


def _summary(dead: DeadLetterRecord) -> dict[str, Any]:
    return {
        "job_id": dead.job_id,
        "kind": dead.kind,
        "queue": dead.queue,
        "key": dead.key,
        "version": dead.version,
        "reason": dead.reason,
        "cleanup_state": dead.cleanup_state.value,
        "replayed_job_id": dead.replayed_job_id,
    }
