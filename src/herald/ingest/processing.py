"""Processing staged rows into canonical plans: locked in batches, upserted, retried.

Place in the pipeline: each ``ingest.process`` job drains one staged run with
:func:`drain_run`; any number of them (in any number of worker processes) share a run.

The fast path is one transaction per batch: lock the next pending rows after this
worker's last key (``FOR UPDATE SKIP LOCKED``: workers get disjoint key ranges, no
central lock), then one statement upserts their plans and marks them done. The row
locks are the claim: no other worker can take the rows while the batch runs, and a
worker that dies mid-batch leaves nothing behind (its transaction rolls back, the rows
are pending again at once; a worker that hangs loses its session after the hold limit).
Each row is written once on its way to done.

A batch the database refuses goes the careful way: its rows are claimed (committed as
processing under a claim token, an attempt each) and upserted row by row; a row that
fails goes back to pending with its error while it has attempts left, then ends failed.
Only rows still held under the same token are touched, so a row requeued and claimed
again elsewhere is never processed twice. Rows a crashed worker left in processing are
requeued after a bound by :func:`requeue_stuck` (a housekeeping duty).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psycopg

from herald import sql
from herald.db import AsyncConn, Row
from herald.rows import one_row

log = logging.getLogger(__name__)

# Errors that belong to the data of a row (retry it, then fail it), not to the database
# connection (those propagate: the job retries, the rows are requeued).
ROW_ERRORS = (psycopg.errors.DataError, psycopg.errors.IntegrityError)

# A run of at least this many rows (and a tenth of the plans the statistics know of)
# ends with an ANALYZE of the plans: below it, autovacuum's own pace is soon enough.
ANALYZE_FROM = 10_000


@dataclass
class DrainStats:
    batches: int = 0
    done: int = 0
    changed: int = 0
    row_failures: int = 0  # rows sent back to pending or failed
    failed: int = 0  # rows that ended failed
    processed_run: Row | None = None
    analyzed: bool = False  # this worker closed the run and refreshed the plans' statistics
    windows: list[tuple[dt.datetime, dt.datetime]] = field(default_factory=list)


async def _lock_batch(conn: AsyncConn, run_id: int, after: int, limit: int) -> list[int]:
    """Lock the next claimable rows after key ``after`` (call inside a transaction)."""
    cur = await conn.execute(
        sql.query("ingest_lock_batch"), {"run_id": run_id, "after": after, "limit": limit}
    )
    return [r["id"] for r in await cur.fetchall()]


async def claim(conn: AsyncConn, run_id: int, token: str, limit: int, after: int = 0) -> list[int]:
    """Claim up to ``limit`` rows after key ``after``: committed as processing."""
    async with conn.transaction():
        ids = await _lock_batch(conn, run_id, after, limit)
        if not ids:
            return []
        cur = await conn.execute(sql.query("ingest_claim"), {"ids": ids, "token": token})
        return sorted(r["id"] for r in await cur.fetchall())


async def _upsert(
    conn: AsyncConn, ids: list[int], token: str, stats: DrainStats, *, claimed: bool
) -> None:
    """Upsert the rows' plans and mark them done (inside the caller's transaction)."""
    params = {"ids": ids, "token": token, "claimed": claimed}
    row = await one_row(conn, "ingest_upsert_plans", params)
    if row["changed"]:
        window = {"changed_from": row["changed_from"], "changed_to": row["changed_to"]}
        await conn.execute(sql.query("ingest_notify"), window)
    stats.done += int(row["done"])
    stats.changed += int(row["changed"])
    if row["changed"]:
        stats.windows.append((row["changed_from"], row["changed_to"]))


async def _process_next(
    conn: AsyncConn, run_id: int, token: str, after: int, limit: int, stats: DrainStats
) -> list[int]:
    """The fast path: lock and process the next batch in one transaction.

    Returns the batch's keys; raises a row error (nothing committed) when the database
    refuses the batch.
    """
    async with conn.transaction():
        ids = await _lock_batch(conn, run_id, after, limit)
        if ids:
            await _upsert(conn, ids, token, stats, claimed=False)
    return ids


async def process_batch(conn: AsyncConn, ids: list[int], token: str, stats: DrainStats) -> None:
    """Upsert a claimed batch; on a data error, isolate the faulty rows one by one."""
    try:
        async with conn.transaction():
            await _upsert(conn, ids, token, stats, claimed=True)
        return
    except ROW_ERRORS as exc:
        log.info("batch of %d rows refused (%s); retrying row by row", len(ids), exc)
    for row_id in ids:
        try:
            async with conn.transaction():
                await _upsert(conn, [row_id], token, stats, claimed=True)
        except ROW_ERRORS as exc:
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            cur = await conn.execute(
                sql.query("ingest_rows_failed"), {"ids": [row_id], "token": token, "error": error}
            )
            for failed in await cur.fetchall():
                stats.row_failures += 1
                stats.failed += failed["state"] == "failed"


async def outstanding(conn: AsyncConn, run_id: int) -> Row:
    return await one_row(conn, "ingest_run_outstanding", {"run_id": run_id})


async def finish_run(conn: AsyncConn, run_id: int) -> Row | None:
    """Mark the run processed if nothing is left in it (None otherwise)."""
    cur = await conn.execute(sql.query("ingest_run_processed"), {"run_id": run_id})
    return await cur.fetchone()


async def refresh_statistics(conn: AsyncConn, processed: int, at_least: int) -> bool:
    """Analyze the canonical plans after a run of ``processed`` rows if it was large.

    Large means at least ``at_least`` rows and a tenth of what the statistics describe.
    Right after a bulk load the planner would otherwise estimate on the table as it was
    (or on no statistics at all) until autovacuum comes round.
    """
    cur = await conn.execute(
        sql.query("ingest_refresh_plan_statistics"),
        {"processed": processed, "at_least": at_least},
    )
    row = await cur.fetchone()
    return bool(row and row["analyzed"])


async def drain_run(
    conn: AsyncConn,
    run_id: int,
    token: str,
    *,
    batch: int = 1000,
    poll: float = 1.0,
    checkpoint: Callable[[], Awaitable[None]] | None = None,
    hold_limit: float | None = None,
    analyze_from: int = ANALYZE_FROM,
    pace: Callable[[], Awaitable[None]] | None = None,
) -> DrainStats:
    """Process the run's rows until none is pending or processing, then close the run.

    Rows held elsewhere (a batch in flight, rows claimed for the careful path) are waited
    for, polling every ``poll`` seconds: their worker finishes them, or they come back
    (rolled back, requeued) and are taken here. ``checkpoint`` is awaited before each
    batch and raises to stop (a lost lease). ``hold_limit`` (seconds) ends this session
    if it ever sits that long inside a batch's transaction. The worker that closes the
    run refreshes the plans' statistics when the run had ``analyze_from`` rows or more
    (see :func:`refresh_statistics`). ``pace`` is awaited after each batch, outside any
    transaction: it may rest there to leave the server to searches
    (:class:`~herald.ingest.pacing.Pacer`).
    """
    if hold_limit is not None:
        await conn.execute(sql.query("ingest_hold_limit"), {"ms": max(1, int(hold_limit * 1000))})
    stats = DrainStats()
    after = 0  # the last key this worker took: the next batch starts past it
    while True:
        if checkpoint is not None:
            await checkpoint()
        try:
            ids = await _process_next(conn, run_id, token, after, batch, stats)
        except ROW_ERRORS as exc:
            log.info("a batch after row %d was refused (%s); claiming it row by row", after, exc)
            ids = await claim(conn, run_id, token, batch, after)
            if ids:
                await process_batch(conn, ids, token, stats)
        if ids:
            stats.batches += 1
            after = ids[-1]
            if pace is not None:
                await pace()  # after the batch committed, before the lease is checked
            continue
        if after:  # past the end: rows behind the key may have come back (requeued)
            after = 0
            continue
        left = await outstanding(conn, run_id)
        if not left["staged"] or (not left["pending"] and not left["processing"]):
            break  # done, or the run's rows are not claimable (failed, still fetching)
        await asyncio.sleep(poll)
    stats.processed_run = await finish_run(conn, run_id)
    if stats.processed_run is not None:
        done = int(stats.processed_run["rows_done"])
        stats.analyzed = await refresh_statistics(conn, done, analyze_from)
    return stats


async def requeue_stuck(conn: AsyncConn, after: float, limit: int = 10_000) -> list[Row]:
    """Rows in processing for longer than ``after`` seconds go back to pending (or fail)."""
    cur = await conn.execute(sql.query("ingest_requeue_stuck"), {"after_s": after, "limit": limit})
    rows = await cur.fetchall()
    if rows:
        log.warning("requeued %d staged rows stuck in processing over %.0f s", len(rows), after)
    return rows
