"""Ingestion runs and their staged rows: the durable checkpoint between fetch and processing.

Place in the pipeline: the fetch job opens a run (:func:`start_run`), hands a
:class:`RunStager` to :func:`~herald.ingest.fetch.fetch_snapshot` as its sink, then
either marks the run staged in its fenced completion (:func:`mark_staged`) or failed
(:func:`fail_run`). Each batch is written in one transaction that first takes the run's
fence (the run is still fetching for this attempt, whose job still holds its lease),
then COPYs the rows and keeps the batch's malformed records in quarantine (bounded per
run, with an expiry). A fetcher that lost its lease therefore writes nothing more, and
only a complete snapshot ever becomes claimable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import set_json_dumps

from herald import sql
from herald.db import AsyncConn, Row
from herald.errors import LeaseLost
from herald.ingest.fetch import Batch
from herald.ingest.records import Plan
from herald.rows import one_row

ABANDONED = "abandoned: the fetch attempt that owned it ended without finishing"


@dataclass(frozen=True)
class StagingLimits:
    """How staged rows are retried, how much quarantine a run keeps and for how long."""

    row_attempts: int = 3
    quarantine_per_run: int = 1000
    quarantine_days: float = 14.0


async def start_run(conn: AsyncConn, provider: str, job_id: int, fence: int) -> Row:
    """Fail any run a vanished attempt left fetching, then open this attempt's run.

    The caller holds the provider's fetch lock, so no live fetcher owns a fetching run.
    """
    async with conn.transaction():
        await conn.execute(
            sql.query("ingest_run_abandon"), {"provider": provider, "error": ABANDONED}
        )
        row = await one_row(
            conn, "ingest_run_start", {"provider": provider, "job_id": job_id, "fence": fence}
        )
    return row


async def fail_run(conn: AsyncConn, run_id: int, fence: int, error: str, attempts: int) -> bool:
    """Mark the run failed (only while it is this attempt's fetching run)."""
    cur = await conn.execute(
        sql.query("ingest_run_fail"),
        {"run_id": run_id, "fence": fence, "error": error or "failed", "attempts": attempts},
    )
    return await cur.fetchone() is not None


async def mark_staged(
    conn: AsyncConn, run_id: int, fence: int, *, bytes_read: int, attempts: int
) -> Row | None:
    """Make the run's rows claimable; None if the run is no longer this attempt's."""
    cur = await conn.execute(
        sql.query("ingest_run_staged"),
        {"run_id": run_id, "fence": fence, "bytes": bytes_read, "attempts": attempts},
    )
    return await cur.fetchone()


def _json_string(value: str) -> str:
    """``value`` as a JSON string: quoted as is when nothing in it needs escaping."""
    if value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=False)


def zones_json(plan: Plan) -> str:
    """The plan's zones as a JSON array (prices as JSON numbers, exactly as given)."""
    quote = _json_string
    return (
        "["
        + ",".join(
            f'{{"zone_id":{quote(z.zone_id)},"name":{quote(z.name)},"price":{z.price},'
            f'"capacity":{z.capacity},"numbered":{"true" if z.numbered else "false"}}}'
            for z in plan.zones
        )
        + "]"
    )


def _as_is(text: str) -> str:
    return text  # zones arrive as JSON text already: jsonb takes it without a second pass


# Column types of ingest_stage_copy (into the session's buffer), in order: a binary COPY
# sends values as they are stored, so the server parses no timestamp or numeric text.
_COPY_TYPES = (
    "bigint", "integer", "text", "text", "text", "timestamptz", "timestamptz", "text",
    "boolean", "numeric", "numeric", "jsonb",
)  # fmt: skip


class RunStager:
    """The fetch's sink: each batch is staged in one fenced transaction."""

    def __init__(
        self,
        conn: AsyncConn,
        run_id: int,
        provider: str,
        fence: int,
        limits: StagingLimits | None = None,
    ) -> None:
        self.conn = conn
        self.run_id = run_id
        self.provider = provider
        self.fence = fence
        self.limits = limits or StagingLimits()
        self.staged = 0
        self.quarantined = 0
        self.rejected = 0

    async def __call__(self, batch: Batch) -> None:
        # The fetcher cancels a write in flight when the body breaks; a COPY cut short
        # would leave the connection mid-command, so the write always runs to its end
        # (committed or rolled back) before the cancellation goes on.
        writing = asyncio.ensure_future(self._stage(batch))
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await writing
            raise

    async def _stage(self, batch: Batch) -> None:
        conn = self.conn
        run_id, attempts = self.run_id, self.limits.row_attempts
        async with conn.transaction():
            cur = await conn.execute(
                sql.query("ingest_run_fence"), {"run_id": run_id, "fence": self.fence}
            )
            if await cur.fetchone() is None:
                raise LeaseLost(
                    f"run {run_id}: this fetch attempt (fence {self.fence}) no longer owns it"
                )
            await conn.execute(
                sql.query("ingest_run_count"),
                {
                    "run_id": run_id,
                    "fence": self.fence,
                    "rows": len(batch.records),
                    "rejected": len(batch.rejected),
                },
            )
            if batch.records:
                await conn.execute(sql.query("ingest_stage_buffer"))
                cursor = conn.cursor()
                set_json_dumps(_as_is, cursor)
                async with cursor.copy(sql.query("ingest_stage_copy")) as copy:
                    copy.set_types(_COPY_TYPES)
                    write = copy.write_row
                    for p in batch.records:
                        await write(
                            (
                                run_id,
                                attempts,
                                p.base_plan_id,
                                p.plan_id,
                                p.title,
                                p.starts_at,
                                p.ends_at,
                                p.sell_mode,
                                p.online,
                                p.min_price,
                                p.max_price,
                                zones_json(p),
                            )
                        )
                await conn.execute(sql.query("ingest_stage_flush"))
            room = self.limits.quarantine_per_run - self.quarantined
            kept = batch.rejected[: max(0, room)]
            if kept:
                await conn.execute(sql.query("ingest_quarantine_insert"), self._quarantine(kept))
        self.staged += len(batch.records)
        self.rejected += len(batch.rejected)
        self.quarantined += len(kept)

    def _quarantine(self, kept: list[Any]) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "provider": self.provider,
            "keep_s": self.limits.quarantine_days * 86400.0,
            "reasons": [r.reason[:2000] or "rejected" for r in kept],
            "raws": [r.raw.decode("utf-8", "replace").replace("\x00", "\ufffd") for r in kept],
            "truncated": [r.truncated for r in kept],
            "offsets": [r.offset for r in kept],
            "lines": [r.line for r in kept],
        }
