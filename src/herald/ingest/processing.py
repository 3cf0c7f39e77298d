"""Processing staged rows into canonical plans: claimed in batches, upserted, retried.

Place in the pipeline: each ``ingest.process`` job drains one staged run with
:func:`drain_run`; any number of them (in any number of worker processes) share a run.
A claim (``FOR UPDATE SKIP LOCKED``, committed at once) moves a batch to processing
under a claim token; the upsert of that batch marks it done in one transaction, and only
rows still held under the same token are touched, so a row requeued and claimed again
elsewhere is never processed twice. A batch the database refuses is retried row by row:
a row that fails goes back to pending with its error while it has attempts left, then
ends failed. Rows a crashed worker left in processing are requeued after a bound by
:func:`requeue_stuck` (a housekeeping duty).
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

log = logging.getLogger(__name__)

# Errors that belong to the data of a row (retry it, then fail it), not to the database
# connection (those propagate: the job retries, the rows are requeued).
ROW_ERRORS = (psycopg.errors.DataError, psycopg.errors.IntegrityError)


@dataclass
class DrainStats:
    batches: int = 0
    done: int = 0
    changed: int = 0
    row_failures: int = 0  # rows sent back to pending or failed
    failed: int = 0  # rows that ended failed
    processed_run: Row | None = None
    windows: list[tuple[dt.datetime, dt.datetime]] = field(default_factory=list)


async def claim(conn: AsyncConn, run_id: int, token: str, limit: int) -> list[int]:
    async with conn.transaction():
        cur = await conn.execute(
            sql.query("ingest_claim"), {"run_id": run_id, "token": token, "limit": limit}
        )
        return [r["id"] for r in await cur.fetchall()]


async def _upsert(conn: AsyncConn, ids: list[int], token: str, stats: DrainStats) -> None:
    async with conn.transaction():
        cur = await conn.execute(sql.query("ingest_upsert_plans"), {"ids": ids, "token": token})
        row = await cur.fetchone()
        assert row is not None
        if row["changed"]:
            window = {"changed_from": row["changed_from"], "changed_to": row["changed_to"]}
            await conn.execute(sql.query("ingest_notify"), window)
            stats.windows.append((row["changed_from"], row["changed_to"]))
    stats.done += int(row["done"])
    stats.changed += int(row["changed"])


async def process_batch(conn: AsyncConn, ids: list[int], token: str, stats: DrainStats) -> None:
    """Upsert a claimed batch; on a data error, isolate the faulty rows one by one."""
    try:
        await _upsert(conn, ids, token, stats)
        return
    except ROW_ERRORS as exc:
        log.info("batch of %d rows refused (%s); retrying row by row", len(ids), exc)
    for row_id in ids:
        try:
            await _upsert(conn, [row_id], token, stats)
        except ROW_ERRORS as exc:
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            cur = await conn.execute(
                sql.query("ingest_rows_failed"), {"ids": [row_id], "token": token, "error": error}
            )
            for failed in await cur.fetchall():
                stats.row_failures += 1
                stats.failed += failed["state"] == "failed"


async def outstanding(conn: AsyncConn, run_id: int) -> Row:
    cur = await conn.execute(sql.query("ingest_run_outstanding"), {"run_id": run_id})
    row = await cur.fetchone()
    assert row is not None
    return row


async def finish_run(conn: AsyncConn, run_id: int) -> Row | None:
    """Mark the run processed if nothing is left in it (None otherwise)."""
    cur = await conn.execute(sql.query("ingest_run_processed"), {"run_id": run_id})
    return await cur.fetchone()


async def drain_run(
    conn: AsyncConn,
    run_id: int,
    token: str,
    *,
    batch: int = 1000,
    poll: float = 1.0,
    checkpoint: Callable[[], Awaitable[None]] | None = None,
) -> DrainStats:
    """Process the run's rows until none is pending or processing, then close the run.

    Rows processing elsewhere are waited for (polling every ``poll`` seconds): their
    worker finishes them, or they are requeued and claimed here. ``checkpoint`` is
    awaited before each claim and raises to stop (a lost lease).
    """
    stats = DrainStats()
    while True:
        if checkpoint is not None:
            await checkpoint()
        ids = await claim(conn, run_id, token, batch)
        if ids:
            stats.batches += 1
            await process_batch(conn, ids, token, stats)
            continue
        left = await outstanding(conn, run_id)
        if not left["pending"] and not left["processing"]:
            break
        if left["pending"] and not left["processing"]:
            # Pending yet not claimable: the run is not staged (failed, still fetching).
            break
        await asyncio.sleep(poll)
    stats.processed_run = await finish_run(conn, run_id)
    return stats


async def requeue_stuck(conn: AsyncConn, after: float, limit: int = 10_000) -> list[Row]:
    """Rows in processing for longer than ``after`` seconds go back to pending (or fail)."""
    cur = await conn.execute(sql.query("ingest_requeue_stuck"), {"after_s": after, "limit": limit})
    rows = await cur.fetchall()
    if rows:
        log.warning("requeued %d staged rows stuck in processing over %.0f s", len(rows), after)
    return rows
