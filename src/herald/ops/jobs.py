"""Manual actions on jobs that have not finished: retry now, cancel.

Each action locks the job, checks its state, changes it and writes the audit record in
one transaction. A wrong state is a :class:`Conflict`; nothing is written then.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from herald.db import AsyncConn
from herald.ops import audit
from herald.ops.conn import Source, connection
from herald.ops.errors import Conflict, NotFound
from herald.rows import fetch_one, from_row, one_row, to_dict
from herald.states import ACTIVE_JOB_STATES, JobState


@dataclass(frozen=True)
class ActedJob:
    """What a manual action reads and changes of a job: its state, timing and lease
    (``ops_job_lock``; the action's statement answers the same columns after it)."""

    id: int
    kind: str
    queue: str
    key: str | None
    version: int
    state: JobState
    run_at: datetime
    attempt: int
    max_attempts: int
    fence: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    finished_at: datetime | None


async def _locked_job(conn: AsyncConn, job_id: int) -> ActedJob:
    row = await fetch_one(conn, "ops_job_lock", {"id": job_id}, ActedJob)
    if row is None:
        raise NotFound("job", job_id)
    return row


async def retry_now(
    conn: Source, job_id: int, *, actor: str, reason: str, channel: str | None = None
) -> ActedJob:
    """Make a waiting job (scheduled, backing off or snoozed) due now; returns the job.

    ``channel`` is the schema's notification channel (``Settings.channel``): given, the
    workers of the job's queue are woken at once instead of at their next poll.
    """
    actor, reason = audit.require(actor, reason)
    async with connection(conn) as c, c.transaction():
        before = await _locked_job(c, job_id)
        if before.state != JobState.WAITING:
            raise Conflict(f"job {job_id} is {before.state}; only a waiting job can be retried now")
        # Locked and waiting: the update cannot miss (MissingRow if it ever did).
        moved = await one_row(c, "ops_job_retry_now", {"id": job_id, "channel": channel})
        after = from_row(ActedJob, moved)  # leaves out the statement's "notified"
        await audit.record(
            c, actor, "retry_now", ("job", job_id), reason, to_dict(before), to_dict(after)
        )
    return after


async def cancel(conn: Source, job_id: int, *, actor: str, reason: str) -> ActedJob:
    """Cancel a waiting or running job for good; returns the job.

    A running job's lease ends here (its fence moves on): the worker's heartbeat fails,
    its handler is cancelled, and whatever it still writes is refused as a stale write.
    """
    actor, reason = audit.require(actor, reason)
    async with connection(conn) as c, c.transaction():
        before = await _locked_job(c, job_id)
        if before.state not in ACTIVE_JOB_STATES:
            raise Conflict(
                f"job {job_id} is {before.state}; only a waiting or running job can be cancelled"
            )
        params = {"id": job_id, "actor": actor, "reason": reason}
        after = from_row(ActedJob, await one_row(c, "ops_job_cancel", params))
        await audit.record(
            c, actor, "cancel", ("job", job_id), reason, to_dict(before), to_dict(after)
        )
    return after
