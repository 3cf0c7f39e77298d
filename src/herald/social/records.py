"""Reading social records for the operator: a job's post, a service's dead letters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from herald.db import AsyncConn, Row
from herald.rows import all_rows, maybe_row


async def post_of_job(conn: AsyncConn, job: Mapping[str, Any]) -> Row | None:
    """The post a ``social.post`` job works on (also one a replay took over since)."""
    payload = job.get("payload") or {}
    post_id = payload.get("post_id") if isinstance(payload, Mapping) else None
    known = post_id if isinstance(post_id, int) else None
    return await maybe_row(
        conn, "social_post_get", {"id": known, "job_id": None if known else job["id"]}
    )


async def get_post(conn: AsyncConn, post_id: int) -> Row | None:
    return await maybe_row(conn, "social_post_get", {"id": post_id, "job_id": None})


async def dead_letters(
    conn: AsyncConn, service: str, before_id: int | None = None, limit: int = 50
) -> list[Row]:
    return await all_rows(
        conn, "social_dlq_list", {"service": service, "before_id": before_id, "limit": limit}
    )


async def dead_letter_kind(conn: AsyncConn, dead_letter_id: int) -> Row | None:
    return await maybe_row(conn, "social_dlq_kind", {"id": dead_letter_id})
