"""Jobs: a filtered list and one job in full (its attempts, lease, steps and history)."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import data
from herald.console.render import render
from herald.console.web import (
    Invalid,
    Missing,
    Signed,
    choice,
    identifier,
    moment,
    number,
    query,
    text,
)

router = APIRouter()
# "created within" choices: label -> span
WITHIN = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "24h": timedelta(days=1),
          "7d": timedelta(days=7)}  # fmt: skip


@router.get("/jobs")
async def jobs(request: Request, caller: Signed) -> Response:
    params = request.query_params
    shown = {
        "state": choice(params, "state", data.JOB_STATES),
        "kind": text(params, "kind", 200),
        "queue": text(params, "queue", 200),
        "key": text(params, "key"),
        "api_key": text(params, "api_key", 100),
        "within": choice(params, "within", tuple(WITHIN)),
        "created_from": text(params, "created_from", 40),
        "created_to": text(params, "created_to", 40),
    }
    created_from = moment(params, "created_from")
    created_to = moment(params, "created_to")
    if shown["within"] is not None:
        since = caller.now - WITHIN[shown["within"]]
        created_from = max(created_from, since) if created_from else since
    if created_from and created_to and created_to <= created_from:
        raise Invalid("created_to must be later than created_from")
    filters = data.JobFilters(
        state=shown["state"],
        kind=shown["kind"],
        queue=shown["queue"],
        key=shown["key"],
        api_key=shown["api_key"],
        created_from=created_from,
        created_to=created_to,
        before_id=number(params, "before_id"),
        limit=50,
    )
    found = await data.jobs(caller, filters)
    older = query(**shown, before_id=found[-1].id) if len(found) == filters.limit else None
    return await render(
        request,
        "jobs.html",
        caller,
        jobs=found,
        shown=shown,
        states=data.JOB_STATES,
        within=tuple(WITHIN),
        kinds=sorted(k.name for k in caller.state.app.kinds()),
        queues=caller.state.app.queues(),
        older=older,
        filtered=any(shown.values()) or filters.before_id is not None,
    )


@router.get("/jobs/{job_id}")
async def job(job_id: str, request: Request, caller: Signed) -> Response:
    found = await data.job(caller, identifier(job_id, "job id"))
    if found is None:
        raise Missing(f"job {job_id} does not exist (or was pruned after its retention)")
    return await render(
        request,
        "job.html",
        caller,
        detail=found,
        job=found.job,
        tracebacks=data.may_see_tracebacks(caller),
    )
