"""Real processes for the social proofs: the HTTP API and workers of the social app.

The sandbox platforms run on a thread of the test process (real loopback HTTP); the API
(``herald serve``) and the workers (``herald worker``) are subprocesses of the social
application, configured through ``HERALD_*`` variables like a deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from herald.api import create_key
from herald.client import open_connection
from herald.config import Settings
from herald.ops.crypto import TokenCipher
from herald.social.sandbox import Sandbox
from tests.procs import ROOT, WorkerProcess, Workers
from tests.social.service import link_body

SOCIAL_APP = "herald.social.app:app"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class SocialWorkers(Workers):
    """Worker subprocesses of the social application."""

    def start(
        self, *args: str, concurrency: int = 4, env: Mapping[str, str] | None = None
    ) -> WorkerProcess:
        number = len(self.started) + 1
        while (self.log_dir / f"worker-{number}.log").exists():
            number += 1
        name = f"worker-{number}"
        log_path = self.log_dir / f"{name}.log"
        log = log_path.open("wb")
        full = {**os.environ, **self.env, **(env or {}), "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "herald", "--app", SOCIAL_APP, "worker"]
        cmd += ["--concurrency", str(concurrency), *args]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=full, stdout=log, stderr=subprocess.STDOUT)
        worker = WorkerProcess(name, proc, log_path, log)
        self.started.append(worker)
        return worker


@dataclass
class World:
    settings: Settings
    sandbox: Sandbox
    workers: SocialWorkers
    api: httpx.AsyncClient
    token: str
    env: dict[str, str]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def link(self, platform: str) -> dict[str, Any]:
        response = await self.api.post(
            "/accounts", json=link_body(self.sandbox, platform), headers=self.headers
        )
        assert response.status_code == 201, response.text
        account: dict[str, Any] = response.json()
        return account

    async def post(
        self, account_id: int, message: str, key: str, media_url: str | None = None
    ) -> httpx.Response:
        body: dict[str, Any] = {"account_id": account_id, "message": message}
        if media_url:
            body["media_url"] = media_url
        return await self.api.post(
            "/social/posts", json=body, headers={**self.headers, "Idempotency-Key": key}
        )

    async def job(self, job_id: int) -> dict[str, Any]:
        response = await self.api.get(f"/jobs/{job_id}", headers=self.headers)
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    async def settled(self, job_id: int, limit: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + limit
        while True:
            job = await self.job(job_id)
            if job["state"] in ("succeeded", "dead", "cancelled"):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} never settled: {job}\n{self.workers.report()}")
            await asyncio.sleep(0.1)


async def answering(
    http: httpx.AsyncClient, path: str, procs: list[subprocess.Popen[bytes]], log: Path
) -> None:
    """Wait until ``path`` answers 200; a process exiting, or a minute, fails with ``log``."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if (await http.get(path)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise AssertionError(_text(log))
        await asyncio.sleep(0.1)


def _text(log: Path) -> str:
    return log.read_text(errors="replace")


def fault_env(seed: int, **platforms: Mapping[str, object]) -> dict[str, str]:
    return {"HERALD_SOCIAL_FAULTS": json.dumps({"seed": seed, "platforms": platforms})}


def _spawn_api(port: int, env: Mapping[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "herald", "--app", SOCIAL_APP, "serve", "--port", str(port)]
    full = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(cmd, cwd=ROOT, env=full, stdout=log, stderr=subprocess.STDOUT)


@contextlib.asynccontextmanager
async def world(
    settings: Settings, database_url: str, log_dir: Path, sandbox: Sandbox, **env: str
) -> AsyncIterator[World]:
    """The API process up, workers ready to start, everything stopped at the end."""
    base = {
        "HERALD_TOKEN_KEYS": TokenCipher.generate_key(),
        "HERALD_SOCIAL_BACKOFF_BASE": "0.05",
        "HERALD_SOCIAL_QUOTAS": "mastodon=100000/10,bluesky=100000/10,facebook=100000/10",
        **env,
    }
    workers = SocialWorkers(settings, database_url, log_dir, base)
    port = free_port()
    api_log = (log_dir / "api.log").open("wb")
    api = _spawn_api(port, workers.env, api_log)
    try:
        async with await open_connection(settings) as conn:
            token = (await create_key(conn, "prover", ["admin"])).token
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60.0) as http:
            await answering(http, "/health", [api], log_dir / "api.log")
            yield World(settings, sandbox, workers, http, token, base)
    finally:
        workers.stop_all()
        api.terminate()
        try:
            api.wait(15)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait(10)
        api_log.close()
