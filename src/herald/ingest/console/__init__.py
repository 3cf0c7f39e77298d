"""Ingestion in the operator console: providers and their runs, one run in detail (rows
by state, failed rows, quarantined records), the quarantine, and "fetch now".

The console does not import this package: the ``herald.console`` entry point of Herald's
distribution names :data:`extension`. Reads go through :mod:`herald.ingest.inspect` and
:func:`herald.ingest.providers.list_providers`, as the CLI's and the API's do; a
quarantined record's raw text (source data) is shown to ``operate`` keys only.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import Caller, Missing, NavEntry, Signed, application_extension, render
from herald.console.data import audit_entries
from herald.console.web import identifier, number, text
from herald.ingest import inspect
from herald.ingest.console.actions import ACTIONS, runs_ingest
from herald.ingest.providers import ListedProvider, list_providers

router = APIRouter()


async def _providers(caller: Caller) -> list[ListedProvider]:
    async with caller.state.client.pool.connection() as conn:
        return await list_providers(conn)


@router.get("/ingestion")
async def ingestion(request: Request, caller: Signed) -> Response:
    provider = text(request.query_params, "provider", 128)
    async with caller.state.client.pool.connection() as conn:
        providers = await list_providers(conn)
        runs = await inspect.list_runs(conn, provider, limit=50)
    return await render(
        request,
        "ingest/ingestion.html",
        caller,
        providers=providers,
        runs=runs,
        provider=provider,
        fetching=runs_ingest(caller),
    )


@router.get("/ingestion/runs/{run_id}")
async def run(run_id: str, request: Request, caller: Signed) -> Response:
    chosen = identifier(run_id, "run id")
    async with caller.state.client.pool.connection() as conn:
        detail = await inspect.run_detail(conn, chosen)
        quarantined = await inspect.list_quarantine(conn, None, chosen, limit=50)
    if detail is None:
        raise Missing(f"ingestion run {run_id} does not exist")
    job = await caller.state.client.get_job(detail.job_id)
    return await render(
        request,
        "ingest/run.html",
        caller,
        run=detail,
        job=job,
        quarantined=quarantined,
        raw=caller.allows("operate"),
    )


@router.get("/ingestion/quarantine")
async def quarantine(request: Request, caller: Signed) -> Response:
    params = request.query_params
    provider = text(params, "provider", 128)
    run_id = number(params, "run")
    async with caller.state.client.pool.connection() as conn:
        records = await inspect.list_quarantine(conn, provider, run_id, limit=100)
    return await render(
        request,
        "ingest/quarantine.html",
        caller,
        records=records,
        provider=provider,
        run_id=run_id,
        raw=caller.allows("operate"),
        providers=[p.name for p in await _providers(caller)],
    )


@router.get("/ingestion/providers/{name}")
async def provider(name: str, request: Request, caller: Signed) -> Response:
    found = [p for p in await _providers(caller) if p.name == name]
    if not found:
        raise Missing(f"no ingestion provider {name[:130]!r} is registered")
    async with caller.state.client.pool.connection() as conn:
        runs = await inspect.list_runs(conn, name, limit=20)
    history = await audit_entries(caller, target_type="ingest_provider", target_id=name, limit=20)
    return await render(
        request,
        "ingest/provider.html",
        caller,
        provider=found[0],
        runs=runs,
        history=history,
        fetching=runs_ingest(caller),
    )


extension = application_extension(
    "herald.ingest", router, NavEntry("Ingestion", "/ingestion", order=60), ACTIONS
)
