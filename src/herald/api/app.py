"""The FastAPI application: ``create_app(herald_app, settings)``.

The lifespan opens one :class:`herald.Client` pool for every request; routes reach it
through :data:`herald.api.state.State`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from herald.api import health, jobs, operations, problems, schedules
from herald.api.state import ApiSettings, ApiState
from herald.client import Client
from herald.config import Settings
from herald.metrics import HeraldMetrics
from herald.ops.errors import AuditInfoMissing, Conflict, NotFound
from herald.registry import Herald
from herald.schedules import ScheduleError

log = logging.getLogger(__name__)


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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not api.auth:
            log.warning("API authentication is OFF: every caller may do everything")
        client = await Client.open(herald_app, settings)
        app.state.herald = ApiState(herald_app, settings, api, metrics, client)
        try:
            yield
        finally:
            await client.close()

    app = FastAPI(
        title="Herald",
        summary="Reliable asynchronous publishing on PostgreSQL",
        version="0.1.0",
        lifespan=lifespan,
    )
    problems.install(app)
    problems.map_error(app, ScheduleError, 422, "invalid-schedule")
    problems.map_error(app, AuditInfoMissing, 422, "reason-required")
    problems.map_error(app, NotFound, 404, "not-found")
    problems.map_error(app, Conflict, 409, "conflict")
    problems.install_fallback(app)
    app.include_router(jobs.router)
    app.include_router(operations.router)
    app.include_router(schedules.router)
    app.include_router(health.router)
    return app
