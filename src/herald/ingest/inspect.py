"""What operators read about ingestion: runs, one run in detail, quarantined records.

Place in the pipeline: shared by ``herald ingest`` and the HTTP API, so both show the
same figures; nothing here writes.
"""

from __future__ import annotations

from typing import Any

from herald import sql
from herald.db import AsyncConn, Row


async def list_runs(conn: AsyncConn, provider: str | None, limit: int = 50) -> list[Row]:
    cur = await conn.execute(sql.query("ingest_runs_list"), {"provider": provider, "limit": limit})
    return await cur.fetchall()


async def run_detail(conn: AsyncConn, run_id: int, failed_rows: int = 20) -> dict[str, Any] | None:
    """The run, its rows by state, and its first failed rows with their errors."""
    cur = await conn.execute(sql.query("ingest_run_get"), {"run_id": run_id})
    row = await cur.fetchone()
    if row is None:
        return None
    cur = await conn.execute(
        sql.query("ingest_run_failed_rows"), {"run_id": run_id, "limit": failed_rows}
    )
    return {**row, "failed_rows": await cur.fetchall()}


async def list_quarantine(
    conn: AsyncConn, provider: str | None, run_id: int | None, limit: int = 50
) -> list[Row]:
    cur = await conn.execute(
        sql.query("ingest_quarantine_list"),
        {"provider": provider, "run_id": run_id, "limit": limit},
    )
    return await cur.fetchall()
