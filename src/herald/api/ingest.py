"""Snapshot ingestion over HTTP: providers, fetches, runs, quarantine, and ``/search``.

Reading needs ``read``; triggering a fetch needs ``submit``; registering or changing a
provider (a URL the server will call, a credential) needs ``operate`` and is audited
with the key's name. A provider's auth header is write-only: answers say whether one is
set (``has_auth``), never its value. ``GET /search`` (and ``/v1/search``) reads
canonical plans from PostgreSQL only (see :mod:`herald.ingest.search`): 400 for bad or
reversed dates, 503 with Retry-After at once when the bulkhead is full.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import Field

from herald.api.auth import Principal, require
from herald.api.models import LimitQuery, Reason, Strict
from herald.api.problems import Problem, not_found, responses
from herald.api.state import ApiState, State
from herald.db import conninfo, database_url
from herald.ingest import search as searching
from herald.ingest.pacing import SEARCH_APPLICATION, serves_search
from herald.ingest.providers import (
    Provider,
    ProviderError,
    ProviderSpec,
    UnknownProvider,
    get_provider,
    list_providers,
    request_fetch,
    save_provider,
    shown,
)
from herald.ops.audit import NO_REASON, Note

log = logging.getLogger(__name__)

router = APIRouter(tags=["ingest"])
Reader = Annotated[Principal, Depends(require("read"))]
Submitter = Annotated[Principal, Depends(require("submit"))]
Operator = Annotated[Principal, Depends(require("operate"))]
ProviderName = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
RunId = Annotated[int, Path(ge=1, le=2**63 - 1)]
Seconds = Annotated[float, Field(gt=0, le=86_400)]
Header = Annotated[str, Field(min_length=1, max_length=8000, pattern=r"^[^\x00\r\n]+$")]


class ProviderIn(Strict):
    url: Annotated[str, Field(min_length=8, max_length=2000)]
    format: Annotated[str, Field(max_length=100)] = "event-plans"
    timezone: Annotated[str, Field(max_length=100)] = "UTC"
    schedule: Annotated[str | None, Field(max_length=200, description="cron, 5 fields")] = None
    connect_timeout: Seconds = 10.0
    read_timeout: Seconds = 30.0
    deadline: Seconds = 1800.0
    attempts: Annotated[int, Field(ge=1, le=20)] = 4
    backoff_base: Seconds = 1.0
    backoff_cap: Seconds = 60.0
    max_retry_after: Annotated[float, Field(ge=0, le=86_400)] = 300.0
    auth_name: Annotated[str, Field(max_length=100)] = "Authorization"
    auth: Header | None = Field(
        default=None,
        description="the auth header's value; write-only. Omitted: keep the stored one; "
        "an empty string is refused (use remove_auth)",
    )
    remove_auth: bool = False
    reason: Reason | None = None


class FetchIn(Strict):
    reason: Reason | None = None


def _plain(provider: Provider) -> dict[str, Any]:
    return dict(jsonable_encoder(shown(provider)))


@router.get("/v1/ingest/providers", responses=responses(401, 403))
async def providers(state: State, _: Reader) -> list[dict[str, Any]]:
    async with state.client.pool.connection() as conn:
        return [_plain(r) for r in await list_providers(conn)]


@router.get("/v1/ingest/providers/{name}", responses=responses(401, 403, 404))
async def provider(name: ProviderName, state: State, _: Reader) -> dict[str, Any]:
    async with state.client.pool.connection() as conn:
        row = await get_provider(conn, name)
    if row is None:
        raise not_found("provider", name)
    return _plain(row)


@router.put("/v1/ingest/providers/{name}", responses=responses(401, 403, 422))
async def save(
    name: ProviderName, body: ProviderIn, response: Response, state: State, who: Operator
) -> dict[str, Any]:
    """Register (201) or update (200) a provider; the auth header is never echoed."""
    auth: str | None = "" if body.remove_auth else body.auth
    fields = body.model_dump(exclude={"auth", "remove_auth", "reason"})
    spec = ProviderSpec(name=name, auth=auth, **fields)
    try:
        async with state.client.pool.connection() as conn:
            row, created = await save_provider(
                conn, spec, app=state.app, note=Note(who.name, body.reason or NO_REASON)
            )
    except ProviderError as exc:
        raise Problem(422, "invalid-provider", str(exc)) from None
    response.status_code = 201 if created else 200
    return dict(jsonable_encoder(row))


@router.post(
    "/v1/ingest/providers/{name}/fetch", status_code=202, responses=responses(401, 403, 404)
)
async def fetch(
    name: ProviderName, state: State, who: Submitter, body: FetchIn | None = None
) -> dict[str, Any]:
    """Admit a fetch; a fetch already waiting or running is answered instead."""
    note = Note(who.name, (body.reason if body else None) or NO_REASON)
    try:
        admitted = await request_fetch(state.client, name, note=note)
    except UnknownProvider:
        raise not_found("provider", name) from None
    return {
        "job_id": admitted.id,
        "outcome": admitted.outcome.value,
        "status_url": f"/v1/jobs/{admitted.id}",
    }


@router.get("/v1/ingest/runs", responses=responses(401, 403))
async def runs(
    state: State,
    _: Reader,
    provider: Annotated[str | None, Query(max_length=128)] = None,
    limit: LimitQuery = 50,
) -> list[dict[str, Any]]:
    from herald.ingest.inspect import list_runs

    async with state.client.pool.connection() as conn:
        return list(jsonable_encoder(await list_runs(conn, provider, limit)))


@router.get("/v1/ingest/runs/{run_id}", responses=responses(401, 403, 404))
async def run(run_id: RunId, state: State, _: Reader) -> dict[str, Any]:
    from herald.ingest.inspect import run_detail

    async with state.client.pool.connection() as conn:
        found = await run_detail(conn, run_id)
    if found is None:
        raise not_found("run", run_id)
    return dict(jsonable_encoder(found))


@router.get("/v1/ingest/quarantine", responses=responses(401, 403))
async def quarantine(
    state: State,
    _: Reader,
    provider: Annotated[str | None, Query(max_length=128)] = None,
    run_id: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
    limit: LimitQuery = 50,
) -> list[dict[str, Any]]:
    from herald.ingest.inspect import list_quarantine

    async with state.client.pool.connection() as conn:
        return list(jsonable_encoder(await list_quarantine(conn, provider, run_id, limit)))


# --- search --------------------------------------------------------------------------


def _service(request: Request) -> searching.SearchService:
    service = getattr(request.app.state, "ingest_search", None)
    if not isinstance(service, searching.SearchService):
        raise Problem(503, "unavailable", "the search service is not running")
    return service


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[None]:
    """Start this API process's search service (pool, bulkhead, cache listener)."""
    state: ApiState = app.state.herald
    serves_search()  # an ingestion job in this process (herald up) must not slow the API
    info = conninfo(database_url(state.settings), state.settings.schema, SEARCH_APPLICATION)
    service = searching.SearchService(
        info, state.settings.schema, searching.SearchSettings.from_env(), state.metrics.registry
    )
    await service.open()
    app.state.ingest_search = service
    try:
        yield
    finally:
        await service.close()


async def _search(
    request: Request,
    starts_at: str | None,
    ends_at: str | None,
    cursor: str | None,
    limit: int | None,
) -> dict[str, Any]:
    service = _service(request)
    try:
        window = searching.parse_window(starts_at, ends_at)
        return await service.search(window, cursor, limit)
    except searching.BadSearch as exc:
        raise Problem(400, "bad-search", str(exc)) from None
    except searching.SearchSaturated as exc:
        retry = str(service.settings.retry_after)
        raise Problem(503, "search-saturated", str(exc), headers={"Retry-After": retry}) from None
    except searching.SearchUnavailable as exc:
        retry = str(service.settings.retry_after)
        raise Problem(503, "unavailable", str(exc), headers={"Retry-After": retry}) from None


StartsAt = Annotated[str | None, Query(max_length=64, description="ISO 8601, UTC if no offset")]
EndsAt = Annotated[str | None, Query(max_length=64, description="ISO 8601, UTC if no offset")]
Cursor = Annotated[str | None, Query(max_length=2000, description="next_cursor of a page")]
Limit = Annotated[int | None, Query(ge=1, le=500)]


@router.get("/search", responses=responses(400, 401, 403, 503), tags=["search"])
@router.get("/v1/search", responses=responses(400, 401, 403, 503), tags=["search"])
async def search(
    request: Request,
    _: Reader,
    starts_at: StartsAt = None,
    ends_at: EndsAt = None,
    cursor: Cursor = None,
    limit: Limit = None,
) -> JSONResponse:
    """Plans ever online that start and end inside [starts_at, ends_at], by start time
    (the same route under ``/v1``)."""
    # The page holds only strings and nulls: encoded as it is, without FastAPI's
    # generic per-value encoder walking every item on the hot path.
    return JSONResponse(await _search(request, starts_at, ends_at, cursor, limit))
