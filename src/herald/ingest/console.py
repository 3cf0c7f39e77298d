"""Ingestion in the operator console: providers (never their auth value) and recent runs.

The console does not import this module: the ``herald.console`` entry point names
:data:`extension`, as for the catalog.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import ConsoleExtension, NavEntry, Signed, render
from herald.ingest.inspect import list_runs
from herald.ingest.providers import list_providers

router = APIRouter()


@router.get("/ingest")
async def ingest_page(request: Request, caller: Signed) -> Response:
    async with caller.state.client.pool.connection() as conn:
        providers = await list_providers(conn)
        runs = await list_runs(conn, None, 50)
    return await render(request, "ingest/runs.html", caller, providers=providers, runs=runs)


extension = ConsoleExtension(
    name="ingest",
    router=router,
    templates=resources.files("herald.ingest") / "console_templates",
    nav=(NavEntry("Ingestion", "/ingest", order=60),),
)
