"""What operators read about ingestion: runs, one run in detail, quarantined records.

Place in the pipeline: shared by ``herald ingest`` and the HTTP API, so both show the
same figures; nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from herald.db import AsyncConn
from herald.rows import fetch_all, from_row, maybe_row


@dataclass(frozen=True)
class IngestRun:
    """A run as the list of runs shows it (``ingest_runs_list``)."""

    id: int
    provider: str
    state: str
    job_id: int
    snapshot_at: dt.datetime
    started_at: dt.datetime
    staged_at: dt.datetime | None
    finished_at: dt.datetime | None
    rows_staged: int
    rejected: int
    rows_done: int
    rows_failed: int
    bytes: int
    http_attempts: int
    error: str | None


@dataclass(frozen=True)
class FailedRow:
    """A staged record that failed processing (``ingest_run_failed_rows``)."""

    id: int
    base_plan_id: str
    plan_id: str
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class RunDetail(IngestRun):
    """One run with its rows counted by state and its first failed rows (``ingest_run_get``)."""

    rows_by_state: dict[str, int]
    quarantined: int
    failed_rows: list[FailedRow] = field(default_factory=list)


@dataclass(frozen=True)
class QuarantinedRecord:
    """A record a run could not stage, with its raw text (``ingest_quarantine_list``)."""

    id: int
    run_id: int
    provider: str
    reason: str
    raw: str
    truncated: bool
    byte_offset: int
    line: int
    created_at: dt.datetime
    expires_at: dt.datetime


async def list_runs(conn: AsyncConn, provider: str | None, limit: int = 50) -> list[IngestRun]:
    params = {"provider": provider, "limit": limit}
    return await fetch_all(conn, "ingest_runs_list", params, IngestRun)


async def run_detail(conn: AsyncConn, run_id: int, failed_rows: int = 20) -> RunDetail | None:
    """The run, its rows by state, and its first failed rows with their errors."""
    row = await maybe_row(conn, "ingest_run_get", {"run_id": run_id})
    if row is None:
        return None
    params = {"run_id": run_id, "limit": failed_rows}
    failed = await fetch_all(conn, "ingest_run_failed_rows", params, FailedRow)
    return from_row(RunDetail, {**row, "failed_rows": failed})


async def list_quarantine(
    conn: AsyncConn, provider: str | None, run_id: int | None, limit: int = 50
) -> list[QuarantinedRecord]:
    params = {"provider": provider, "run_id": run_id, "limit": limit}
    return await fetch_all(conn, "ingest_quarantine_list", params, QuarantinedRecord)
