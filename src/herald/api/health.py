"""Liveness, readiness and the Prometheus scrape; none of them needs an API key."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from herald.api.auth import Principal
from herald.api.problems import Problem, problem_response, responses
from herald.api.state import State
from herald.metrics import CONTENT_TYPE
from herald.migrate import MigrationError, pending

router = APIRouter(tags=["health"])
metrics_router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The database is reachable and its schema is current",
    responses=responses(503),
    response_model=None,
)
# The social gateway's reference API names the same check /health.
@router.get(
    "/health",
    summary="The database is reachable and its schema is current (as /readyz)",
    responses=responses(503),
    response_model=None,
)
async def readyz(request: Request, state: State) -> dict[str, Any] | JSONResponse:
    try:
        async with state.client.pool.connection(timeout=5.0) as conn:
            todo = await pending(conn)
    except (psycopg.Error, OSError) as exc:
        return problem_response(request, 503, "not-ready", f"database unreachable: {exc}")
    except MigrationError as exc:
        return problem_response(request, 503, "not-ready", str(exc))
    if todo:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in todo)
        return problem_response(
            request, 503, "not-ready", f"migrations pending: {names} (run `herald migrate`)"
        )
    return {"status": "ready"}


@metrics_router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE: {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request, state: State) -> Response:
    if state.api.metrics == "off":  # served on a port of its own, or not at all
        raise Problem(404, "not-found", "metrics are not served on this port")
    if state.api.metrics == "key":  # the boundary checked the key; the scope is read
        principal = getattr(request.state, "principal", None)
        if not isinstance(principal, Principal) or not principal.allows("read"):
            raise Problem(403, "forbidden", "metrics need an API key with the read scope")
    await state.metrics.refresh(state.client.pool)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
