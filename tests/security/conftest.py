"""An API with the catalog registered and one key per scope, served in this process."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald import Herald, JobContext, Settings
from herald.api import SCOPES, ApiSettings, create_app, create_key
from herald.catalog.pipeline import close_embedded_store, register_catalog
from herald.catalog.publishing import CatalogSettings
from herald.client import open_connection

PROBLEM = "application/problem+json"


def catalog_app() -> Herald:
    """The catalog kinds plus one plain task, as an application built on Herald has."""
    app = Herald()

    @app.task("plain")
    async def plain(ctx: JobContext, payload: dict[str, Any]) -> None:
        return None

    @app.task("operator_only", api_scope="operate")
    async def operator_only(ctx: JobContext, payload: dict[str, Any]) -> None:
        return None

    return app


@dataclass
class Api:
    http: httpx.AsyncClient
    asgi: FastAPI
    app: Herald
    settings: Settings
    tokens: dict[str, str]  # scope -> a key with only that scope

    def auth(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}


async def open_api(settings: Settings, tmp_path: Path, api: ApiSettings) -> Api:
    local = settings.with_(data_dir=tmp_path / "data")
    app = catalog_app()
    register_catalog(app, local, CatalogSettings(public_url="https://data.example.org"))
    asgi = create_app(app, local, api)
    async with await open_connection(local) as conn:
        tag = secrets.token_hex(3)  # several APIs may share one schema
        tokens = {s: (await create_key(conn, f"{s}-{tag}", [s])).token for s in SCOPES}
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://h.test")
    return Api(http, asgi, app, local, tokens)


@pytest.fixture
async def api(settings: Settings, tmp_path: Path) -> AsyncIterator[Api]:
    opened = await open_api(settings, tmp_path, ApiSettings())
    async with opened.asgi.router.lifespan_context(opened.asgi), opened.http:
        yield opened
    close_embedded_store(opened.settings)


def problem(response: httpx.Response, status: int, slug: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body: dict[str, Any] = response.json()
    if slug is not None:
        assert body["type"].endswith("/" + slug), body
    return body
