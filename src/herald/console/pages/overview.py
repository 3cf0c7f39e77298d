"""The overview (queues, their charts, what needs attention) and the audit log."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import data
from herald.console.render import render
from herald.console.web import Signed, choice, number, query, text

router = APIRouter()


@router.get("/")
async def overview(request: Request, caller: Signed) -> Response:
    window = choice(request.query_params, "window", tuple(data.WINDOWS)) or "1h"
    found = await data.overview(caller, window)
    return await render(
        request, "overview.html", caller, overview=found, windows=tuple(data.WINDOWS)
    )


@router.get("/audit")
async def audit_log(request: Request, caller: Signed) -> Response:
    params = request.query_params
    filters = {
        "target_type": text(params, "target_type", 100),
        "target_id": text(params, "target_id"),
        "actor": text(params, "actor", 200),
        "action": text(params, "action", 100),
    }
    before_id = number(params, "before_id")
    entries = await data.audit_entries(caller, **filters, before_id=before_id, limit=50)
    older = query(**filters, before_id=entries[-1].id) if len(entries) == 50 else None
    return await render(
        request, "audit.html", caller, entries=entries, filters=filters, older=older
    )
