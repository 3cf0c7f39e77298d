"""Manual actions on jobs that have not finished: retry now, cancel.

Each action locks the job, checks its state, changes it and writes the audit record in
one transaction. A wrong state is a :class:`Conflict`; nothing is written then.
"""

from __future__ import annotations

from herald.db import AsyncConn, Row
from herald.ops import audit
from herald.ops.conn import Source, connection
from herald.ops.errors import Conflict, NotFound
from herald.rows import maybe_row, one_row
from herald.states import ACTIVE_JOB_STATES, JobState


async def _locked_job(conn: AsyncConn, job_id: int) -> Row:
    row = await maybe_row(conn, "ops_job_lock", {"id": job_id})
    if row is None:
        raise NotFound("job", job_id)
    return row


async def retry_now(
    conn: Source, job_id: int, *, actor: str, reason: str, channel: str | None = None
) -> Row:
    """Make a waiting job (scheduled, backing off or snoozed) due now; returns the job.

    ``channel`` is the schema's notification channel (``Settings.channel``): given, the
    workers of the job's queue are woken at once instead of at their next poll.
    """
    actor, reason = audit.require(actor, reason)
    async with connection(conn) as c, c.transaction():
        before = await _locked_job(c, job_id)
        if before["state"] != JobState.WAITING:
            raise Conflict(
                f"job {job_id} is {before['state']}; only a waiting job can be retried now"
            )
        after = await maybe_row(c, "ops_job_retry_now", {"id": job_id, "channel": channel})
        assert after is not None  # locked and waiting: the update cannot miss
        after.pop("notified", None)
        await audit.record(c, actor, "retry_now", ("job", job_id), reason, before, after)
    return after


async def cancel(conn: Source, job_id: int, *, actor: str, reason: str) -> Row:
    """Cancel a waiting or running job for good; returns the job.

    A running job's lease ends here (its fence moves on): the worker's heartbeat fails,
    its handler is cancelled, and whatever it still writes is refused as a stale write.
    """
    actor, reason = audit.require(actor, reason)
    async with connection(conn) as c, c.transaction():
        before = await _locked_job(c, job_id)
        if before["state"] not in ACTIVE_JOB_STATES:
            raise Conflict(
                f"job {job_id} is {before['state']}; only a waiting or running job can be cancelled"
            )
        after = await one_row(c, "ops_job_cancel", {"id": job_id, "actor": actor, "reason": reason})
        await audit.record(c, actor, "cancel", ("job", job_id), reason, before, after)
    return after
