"""``/v1/jobs``: admit (202 + Location), inspect, list. Cancel and retry-now live in
:mod:`herald.api.operations` with the other manual actions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Response

from herald import sql
from herald.api.auth import Principal, require
from herald.api.disclosure import public_row
from herald.api.models import (
    EnqueuedOut,
    IdPath,
    JobIn,
    JobOut,
    JobSummary,
    KeyQuery,
    LimitQuery,
    NameQuery,
    State,
)
from herald.api.problems import Problem, not_found, responses
from herald.api.state import ApiState
from herald.api.state import State as AppState
from herald.client import Enqueued, Outcome
from herald.db import AsyncConn
from herald.rows import one_row, to_dict

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Replays within the retention return the same job; "
        "the same key with a different request is a 409.",
    ),
]


def status_url(job_id: int) -> str:
    return f"/v1/jobs/{job_id}"


@router.post(
    "",
    status_code=202,
    response_model=EnqueuedOut,
    responses=responses(401, 403, 409, 413, 422, 429),
    summary="Admit a job (of a kind that may be submitted over the API)",
)
async def submit(
    body: JobIn,
    response: Response,
    state: AppState,
    principal: Annotated[Principal, Depends(require("submit"))],
    idempotency_key: IdempotencyKey = None,
) -> EnqueuedOut:
    """Accepted for processing. An active job for the same (kind, key) answers 202 with
    that job (outcome ``in_progress``); an Idempotency-Key replay answers the original.
    Internal kinds (e.g. ``catalog.publish``) are refused: their own routes admit them."""
    check_submittable(state, principal, body.kind)
    async with state.client.pool.connection() as conn, conn.transaction():
        admitted = await _admit(state, conn, principal, body, idempotency_key)
    state.metrics.enqueued.labels(body.kind, admitted.outcome.value).inc()
    url = status_url(admitted.id)
    response.headers["Location"] = url
    return EnqueuedOut(
        id=admitted.id, version=admitted.version, outcome=admitted.outcome.value, status_url=url
    )


def check_submittable(state: ApiState, principal: Principal, kind_name: str) -> None:
    """403 unless the kind may be submitted over the API with this key's scopes."""
    kind = state.app.kind(kind_name)  # UnknownKind: 422
    if kind.api_scope is None:
        raise Problem(
            403,
            "internal-kind",
            f"kind {kind.name!r} is internal: it cannot be submitted or scheduled over the API",
        )
    if not principal.allows(kind.api_scope):
        raise Problem(
            403,
            "forbidden",
            f"API key {principal.name!r} lacks the {kind.api_scope!r} scope kind "
            f"{kind.name!r} needs",
        )


async def _admit(
    state: ApiState, conn: AsyncConn, principal: Principal, body: JobIn, ikey: str | None
) -> Enqueued:
    """Admit within the caller's transaction; a key over its quota rolls it all back."""
    quota = principal.max_active_jobs
    if principal.key_id is not None and quota is not None:
        await conn.execute(sql.query("api_quota_lock"), {"key_id": principal.key_id})
    admitted = await state.client.enqueue(
        body.kind,
        body.payload,
        key=body.key,
        idempotency_key=ikey,
        run_at=body.run_at,
        priority=body.priority,
        conn=conn,
    )
    if principal.key_id is None or admitted.outcome is not Outcome.CREATED:
        return admitted
    params = {"job_id": admitted.id, "key_id": principal.key_id}
    await conn.execute(sql.query("api_submission_record"), params)
    if quota is not None:
        active = await one_row(conn, "api_active_count", params)
        if active["n"] > quota:
            state.metrics.quota_refusals.labels(principal.name).inc()
            raise Problem(
                429,
                "quota",
                f"API key {principal.name!r} already has {quota} active jobs (its quota)",
                headers={"Retry-After": str(state.api.retry_after)},
                quota=quota,
            )
    return admitted


@router.get(
    "",
    response_model=list[JobSummary],
    responses=responses(401, 403, 422),
    summary="List recent jobs",
)
async def list_jobs(
    state: AppState,
    _: Annotated[Principal, Depends(require("read"))],
    job_state: Annotated[State | None, Query(alias="state")] = None,
    kind: NameQuery = None,
    queue: NameQuery = None,
    key: KeyQuery = None,
    limit: LimitQuery = 50,
) -> list[dict[str, Any]]:
    rows = await state.client.list_jobs(
        state=job_state, kind=kind, queue=queue, key=key, limit=limit
    )
    return [public_row(to_dict(row)) for row in rows]


@router.get(
    "/{job_id}",
    response_model=JobOut,
    responses=responses(401, 403, 404, 422),
    summary="Show one job: state, step, attempts, errors, checkpoint, result, history",
)
async def show_job(
    job_id: IdPath, state: AppState, _: Annotated[Principal, Depends(require("read"))]
) -> dict[str, Any]:
    found = await state.client.get_job(job_id)
    if found is None:
        raise not_found("job", job_id)
    row = public_row(to_dict(found), values=("payload", "checkpoint", "result"))
    row["history"] = {
        "created_at": row["created_at"],
        "run_at": row["run_at"],
        "attempted_at": row["attempted_at"],
        "finished_at": row["finished_at"],
        "errors": row["errors"],
    }
    return row
