"""What the console's HTTP tests share: the console on a real database, a browser-like
client (one cookie jar per ``browser()``), keys, and signing in."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI

from herald.api import ApiSettings, create_app, create_key
from herald.client import Client, open_connection
from herald.config import Settings
from herald.console import install
from herald.console.registry import discover
from tests.support import APP

BASE = "http://herald.test"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Console:
    app: FastAPI
    settings: Settings
    client: Client

    def browser(self, base: str = BASE, **headers: str) -> httpx.AsyncClient:
        """A fresh cookie jar: one browser."""
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url=base, headers=headers
        )

    async def key(self, name: str, scopes: Sequence[str]) -> str:
        async with await open_connection(self.settings) as conn:
            return (await create_key(conn, name, scopes)).token

    async def rows(self, query: str, *params: Any) -> list[dict[str, Any]]:
        async with await open_connection(self.settings) as conn:
            cur = await conn.execute(query.encode(), params)
            return await cur.fetchall()


async def sign_in(http: httpx.AsyncClient, token: str) -> str:
    """Sign ``http`` in with ``token``; returns the session's CSRF token."""
    form = await http.get("/ui/signin")
    match = CSRF.search(form.text)
    assert match, form.text
    done = await http.post(
        "/ui/signin", data={"csrf": match.group(1), "api_key": token, "next": "/"}
    )
    assert done.status_code == 303, done.text
    page = await http.get("/ui/")
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found
    return found.group(1)


@asynccontextmanager
async def open_console(settings: Settings) -> AsyncIterator[Console]:
    """The API with the console and every discovered extension, started, and a client."""
    app = create_app(APP, settings, ApiSettings())
    install(app, APP, extensions=discover())
    async with app.router.lifespan_context(app), await Client.open(APP, settings) as client:
        yield Console(app, settings, client)
