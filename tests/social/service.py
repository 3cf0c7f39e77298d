"""A social application on a real database, its HTTP API and a sandbox, for the tests."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI

from herald.api import ApiSettings, create_app, create_key
from herald.backoff import Backoff
from herald.client import Client, open_connection
from herald.config import Settings
from herald.ops.crypto import TokenCipher
from herald.registry import Herald
from herald.social.accounts import PRIMARY_SECRET
from herald.social.config import DOCUMENTED_QUOTAS, Quota, SocialSettings
from herald.social.pipeline import register_social
from herald.social.runtime import SocialRuntime
from herald.social.sandbox import Sandbox
from herald.worker import Worker

FAST = Backoff(base=0.05, factor=2.0, cap=0.2, jitter=0.1)


def link_body(sandbox: Sandbox, platform: str, name: str | None = None) -> dict[str, Any]:
    """What a caller sends to link a new sandbox account of ``platform``."""
    made = sandbox.add_account(platform, name)
    account = made.account(sandbox.url)
    primary = PRIMARY_SECRET[platform]
    return {
        "provider": platform,
        "name": made.name,
        "page_id": account.ref,
        "base_url": account.base_url,
        "access_token": made.credentials[primary],
        "credentials": {k: v for k, v in made.credentials.items() if k != primary},
        "options": dict(account.options),
    }


@dataclass
class Service:
    app: Herald
    runtime: SocialRuntime
    settings: Settings
    http: httpx.AsyncClient
    api: FastAPI
    client: Client
    sandbox: Sandbox
    token: str
    environ: dict[str, str]
    workers: list[Worker] = field(default_factory=list)

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}

    async def key(self, name: str, scopes: list[str]) -> str:
        async with await open_connection(self.settings) as conn:
            return (await create_key(conn, name, scopes)).token

    async def link(self, platform: str = "mastodon", **changes: Any) -> dict[str, Any]:
        body = {**link_body(self.sandbox, platform), **changes}
        response = await self.http.post("/accounts", json=body, headers=self.auth())
        assert response.status_code == 201, response.text
        account: dict[str, Any] = response.json()
        return account

    async def post(
        self, account_id: int, message: str, key: str, media_url: str | None = None
    ) -> httpx.Response:
        body: dict[str, Any] = {"account_id": account_id, "message": message}
        if media_url:
            body["media_url"] = media_url
        return await self.http.post(
            "/social/posts", json=body, headers={**self.auth(), "Idempotency-Key": key}
        )

    async def job(self, job_id: int) -> dict[str, Any]:
        response = await self.http.get(f"/jobs/{job_id}", headers=self.auth())
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    async def settled(self, job_id: int, limit: float = 30.0) -> dict[str, Any]:
        """The job once it reached a terminal state (``limit`` only guards a hang)."""
        deadline = time.monotonic() + limit
        while True:
            job = await self.job(job_id)
            if job["state"] in ("succeeded", "dead", "cancelled"):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} never settled: {job}")
            await asyncio.sleep(0.05)

    @contextlib.asynccontextmanager
    async def worker(self, **options: Any) -> AsyncIterator[Worker]:
        worker = Worker(self.app, settings=self.settings, **options)
        task = asyncio.create_task(worker.run())
        ready = asyncio.create_task(worker.ready.wait())
        await asyncio.wait([task, ready], timeout=30, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if task.done():
            task.result()
        try:
            yield worker
        finally:
            worker.stop()
            await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def social_service(
    settings: Settings, sandbox: Sandbox, environ: dict[str, str] | None = None, **social: Any
) -> AsyncIterator[Service]:
    env = {"HERALD_TOKEN_KEYS": TokenCipher.generate_key(), **(environ or {})}
    app = Herald()
    # Buckets far above what a test sends, unless the test is about them.
    generous = {p: Quota(10_000, 10.0) for p in DOCUMENTED_QUOTAS}
    config = SocialSettings(**{"backoff": FAST, "quotas": generous, **social})
    runtime = register_social(app, settings, config, environ=env)
    api = create_app(app, settings, ApiSettings())
    async with (
        api.router.lifespan_context(api),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://herald.test"
        ) as http,
    ):
        async with await open_connection(settings) as conn:
            admin = await create_key(conn, "admin", ["admin"])
        client = api.state.herald.client
        try:
            yield Service(app, runtime, settings, http, api, client, sandbox, admin.token, env)
        finally:
            await runtime.aclose()
