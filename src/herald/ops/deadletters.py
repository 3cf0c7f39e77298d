"""Dead letters: list, inspect, replay, discard.

A dead letter is the record of a job that failed for good, written in the same
statement that made the job dead. It stays until an operator discards it or the bounds
of :mod:`herald.ops.dead_bounds` (retention, cap) drop it; replaying it creates a new job
and leaves the record (and its pending cleanup) in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from herald import sql
from herald.client import Client, Outcome
from herald.db import AsyncConn, Row
from herald.ops import audit, dead_bounds
from herald.ops.conn import Source, connection
from herald.ops.errors import ActiveJobExists, Conflict, NotFound
from herald.rows import all_rows, maybe_row

CLEANUP_STATES = ("pending", "done", "not_needed")


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
) -> list[Row]:
    """Dead letters, newest first, with their cleanup state.

    ``error`` matches a case-insensitive fragment of any recorded error message. Pass
    the last id seen as ``before_id`` for the next page.
    """
    if not 1 <= limit <= 1000:
        raise ValueError("limit must be between 1 and 1000")
    if cleanup_state is not None and cleanup_state not in CLEANUP_STATES:
        raise ValueError(f"cleanup_state must be one of {', '.join(CLEANUP_STATES)}")
    async with connection(conn) as c:
        return await all_rows(
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
        )


async def get(conn: Source, dead_letter_id: int) -> Row:
    """One dead letter in full: payload, errors, what needs cleaning up, cleanup state,
    the newest replay, and the original job's state (None once the job was pruned)."""
    async with connection(conn) as c:
        row = await maybe_row(c, "ops_dead_get", {"id": dead_letter_id})
    if row is None:
        raise NotFound("dead letter", dead_letter_id)
    return row


async def _locked(conn: AsyncConn, dead_letter_id: int) -> Row:
    row = await maybe_row(conn, "ops_dead_lock", {"id": dead_letter_id})
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
        if dead["replayed_job_id"] is not None:
            earlier = await client.get_job(dead["replayed_job_id"])
            return Replayed(
                dead_letter_id,
                dead["job_id"],
                dead["replayed_job_id"],
                earlier["version"] if earlier is not None else None,
                created=False,
            )
        redacted = dead_bounds.redacted_fields(dead["payload"])
        if redacted:
            raise Conflict(
                f"dead letter {dead_letter_id} had fields redacted ({', '.join(redacted)}): "
                "it cannot be replayed as it was; submit the job again with its real values"
            )
        admitted = await client.enqueue(
            dead["kind"],
            dead["payload"],
            key=dead["key"],
            queue=dead["queue"],
            conn=conn,
            replay_of=dead["job_id"],
        )
        if admitted.outcome is Outcome.IN_PROGRESS:
            raise ActiveJobExists(dead["kind"], dead["key"], admitted.id, admitted.version)
        await conn.execute(
            sql.query("ops_dead_mark_replayed"), {"id": dead_letter_id, "job_id": admitted.id}
        )
        before = _summary(dead)
        after = {**before, "replayed_job_id": admitted.id, "replay_version": admitted.version}
        await audit.record(
            conn, actor, "replay", ("dead_letter", dead_letter_id), reason, before, after
        )
    return Replayed(dead_letter_id, dead["job_id"], admitted.id, admitted.version)


async def discard(
    conn: Source, dead_letter_id: int, *, actor: str, reason: str, force: bool = False
) -> Row:
    """Remove a dead letter; the audit record keeps it in full (its ``before``).

    A dead letter whose cleanup is still pending would take that cleanup with it, so it
    is refused with :class:`Conflict` unless ``force`` is given (the audit record then
    says the cleanup was abandoned). Returns the removed record.
    """
    actor, reason = audit.require(actor, reason)
    async with connection(conn) as c, c.transaction():
        dead = await _locked(c, dead_letter_id)
        if dead["cleanup_state"] == "pending" and not force:
            raise Conflict(
                f"dead letter {dead_letter_id} still has a pending cleanup "
                f"({dead['cleanup_attempts']} attempts so far); wait for it, or discard with "
                "force to abandon the cleanup"
            )
        await c.execute(sql.query("ops_dead_discard"), {"id": dead_letter_id})
        after: dict[str, Any] | None = None
        if dead["cleanup_state"] == "pending":
            after = {"cleanup_abandoned": True}
        await audit.record(
            c, actor, "discard", ("dead_letter", dead_letter_id), reason, dead, after
        )
    return dead


def _summary(dead: Row) -> dict[str, Any]:
    return {
        "job_id": dead["job_id"],
        "kind": dead["kind"],
        "queue": dead["queue"],
        "key": dead["key"],
        "version": dead["version"],
        "reason": dead["reason"],
        "cleanup_state": dead["cleanup_state"],
        "replayed_job_id": dead["replayed_job_id"],
    }
