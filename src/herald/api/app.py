"""The FastAPI application: ``create_app(herald_app, settings)``.

The lifespan opens one :class:`herald.Client` pool for every request; routes reach it
through :data:`herald.api.state.State`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from psycopg_pool import AsyncConnectionPool

from herald.api import (
    catalog,
    docs,
    health,
    ingest,
    jobs,
    operations,
    problems,
    schedules,
    social,
)
from herald.api.boundary import Boundary
from herald.api.state import ApiSettings, ApiState
from herald.catalog.errors import TripleStoreError
from herald.catalog.metadata import PREFIXES
from herald.catalog.sparql.runner import QueryRunner, SparqlLimits
from herald.client import Client
from herald.config import Settings
from herald.db import AsyncConn, conninfo, database_url, make_pool
from herald.generations import api as generations_api
from herald.metrics import HeraldMetrics
from herald.ops.errors import AuditInfoMissing, Conflict, NotFound
from herald.registry import Herald
from herald.schedules import RecurrenceError, ScheduleError

log = logging.getLogger(__name__)

# A key lookup is one short read: two connections keep up with a busy API process.
KEY_POOL_SIZE = 2

DESCRIPTION = """
**Authentication.** Every `/v1` route needs `Authorization: Bearer <token>`. Tokens are
issued by `herald apikey create NAME --scopes submit,read` (printed once; only their
SHA-256 is stored) and revoked by `herald apikey revoke NAME`. Scopes: `submit` (admit
jobs), `read` (inspect), `operate` (cancel, retry-now, dead-letter replay and discard,
schedule changes), `admin` (all of them). Authentication is on by default, whether or
not a key exists yet; only an explicit `HERALD_API_AUTH=off` (or `--insecure-no-auth`)
turns it off, for a local demo on a loopback address: then nobody is `admin` and every
response carries `Herald-Auth: off`. `/healthz`, `/readyz` and this document need no
key; `/metrics` needs none unless `HERALD_METRICS=key` (a `read` key) or it is served
on a port of its own (`HERALD_METRICS_PORT`). Keys are checked before a request body is
read; bodies larger than `HERALD_API_MAX_BODY` are refused with 413 before reading.

**Manual actions** take a `reason` in the body; the key's name is recorded as the actor
in the audit log (`GET /v1/audit`). Registering a dataset and requesting a publication
take an optional `reason`; deleting a version, like every other removal, needs one.

**Admission.** `POST /v1/jobs` answers 202 with the job's id, version and status URL
(also in `Location`). A trigger for an object (kind + key) that already has an active
job answers 202 with that job (`outcome: in_progress`). An `Idempotency-Key` header
replays the original answer; the same key with another request is a 409. A key created
with `--max-active-jobs N` gets a 429 with `Retry-After` while N of its jobs are
waiting or running.

**Errors** are `application/problem+json` (RFC 9457): 400 for a body that is not JSON
(saying where it breaks), 401/403 for keys and scopes, 404 for unknown ids, 409 for
conflicts, 413 for oversized payloads, 415 for a body sent as another media type than
`application/json`, 422 for invalid input.
"""


def key_pool(settings: Settings) -> AsyncConnectionPool[AsyncConn]:
    """The API keys' own small pool: its connections stay acting for the platform."""
    info = conninfo(database_url(settings), settings.schema, settings=settings)
    return make_pool(info, KEY_POOL_SIZE, name="herald-api-keys", pooled=settings.pooled)


def _serving(
    herald_app: Herald, settings: Settings, api: ApiSettings, metrics: HeraldMetrics
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The lifespan that gives the routes their state (one client pool for all requests)."""

    social.include_meters(herald_app, metrics)

    @asynccontextmanager
    async def serving(app: FastAPI) -> AsyncIterator[None]:
        client = await Client.open(herald_app, settings)
        keys = key_pool(settings)
        try:
            await keys.open(wait=True)
            app.state.herald = ApiState(herald_app, settings, api, metrics, client, keys)
            yield
        finally:
            await keys.close()
            await client.close()

    return serving


def create_app(
    herald_app: Herald,
    settings: Settings | None = None,
    api: ApiSettings | None = None,
    *,
    metrics: HeraldMetrics | None = None,
) -> FastAPI:
    """Build the HTTP API for ``herald_app``; pass ``metrics`` to share them with a worker."""
    settings = settings or Settings.from_env()
    api = api or ApiSettings.from_env()
    metrics = metrics or HeraldMetrics()

    serving = _serving(herald_app, settings, api, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not api.auth:
            log.warning(
                "API authentication is OFF: every caller may submit, read and operate "
                "(never admin); every response says so (Herald-Auth: off)"
            )
        # Query processes of the SPARQL endpoint: started on demand, all killed on exit.
        app.state.sparql = QueryRunner(
            SparqlLimits.from_env(), {p: str(ns) for p, ns in PREFIXES.items()}
        )
        try:
            async with serving(app), ingest.serving(app):
                yield
        finally:
            await app.state.sparql.close()

    app = FastAPI(
        title="Herald",
        summary="Reliable asynchronous publishing on PostgreSQL",
        description=DESCRIPTION,
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by herald.api.docs from the installed package, not a CDN
        redoc_url=None,
    )
    docs.install(app)
    problems.install(app)
    problems.map_error(app, ScheduleError, 422, "invalid-schedule")
    problems.map_error(app, RecurrenceError, 422, "invalid-schedule")
    # JSON may carry lone UTF-16 surrogates ("\ud800"), which no UTF-8 text can hold.
    problems.map_error(app, UnicodeEncodeError, 422, "invalid-text")
    problems.map_error(app, AuditInfoMissing, 422, "reason-required")
    problems.map_error(app, NotFound, 404, "not-found")
    problems.map_error(app, Conflict, 409, "conflict")
    problems.map_unavailable(app, TripleStoreError, "the triple store")
    problems.install_fallback(app)
    app.include_router(jobs.router)
    app.include_router(operations.router)
    app.include_router(schedules.router)
    app.include_router(catalog.router)
    app.include_router(ingest.router)
    app.include_router(generations_api.router)
    app.include_router(health.router)
    app.include_router(social.router)
    app.include_router(health.metrics_router)
    # Outermost: size and key are checked before routing and before the body is read.
    app.add_middleware(Boundary, api=api)
    return app


def create_metrics_app(
    herald_app: Herald, settings: Settings, metrics: HeraldMetrics, api: ApiSettings | None = None
) -> FastAPI:
    """``/metrics`` alone, for a port of its own (``HERALD_METRICS_PORT``)."""
    api = api or ApiSettings.from_env()
    public = ApiSettings(auth=api.auth, retry_after=api.retry_after, metrics="public")
    app = FastAPI(
        title="Herald metrics",
        lifespan=_serving(herald_app, settings, public, metrics),
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    problems.install(app)
    problems.install_fallback(app)
    app.include_router(health.metrics_router)
    return app
