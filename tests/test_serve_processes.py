"""``herald serve --reuse-port``: several API processes share one port."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from herald.config import Settings
from tests.social.processes import answering, free_port

ROOT = Path(__file__).resolve().parent.parent


def _serve(port: int, settings: Settings, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "HERALD_DATABASE_URL": str(settings.database_url),
        "HERALD_SCHEMA": settings.schema,
    }
    cmd = [sys.executable, "-m", "herald", "--app", "herald.demo:app", "serve", "--port", str(port)]
    with log.open("wb") as out:
        return subprocess.Popen([*cmd, *extra], cwd=ROOT, env=env, stdout=out, stderr=out)


def _listening(port: int) -> int:
    """How many sockets listen on ``port`` of 127.0.0.1 (Linux)."""
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    local = f"0100007F:{port:04X}"
    return sum(1 for line in lines if line.split()[1] == local and line.split()[3] == "0A")


def _text(log: Path) -> str:
    return log.read_text(errors="replace")


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_processes_started_with_reuse_port_share_it(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    procs = [_serve(port, settings, tmp_path / f"api{i}.log", "--reuse-port") for i in (0, 1)]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            await answering(http, "/healthz", procs[:1], tmp_path / "api0.log")
        # Each process listens on a socket of its own bound to the port (without the
        # option the second could not bind it, and would exit).
        logs = [tmp_path / f"api{i}.log" for i in (0, 1)]
        deadline = time.monotonic() + 90
        while _listening(port) < 2:
            assert [p.poll() for p in procs] == [None, None], [_text(log) for log in logs]
            assert time.monotonic() < deadline, [_text(log) for log in logs]
            await asyncio.sleep(0.2)
        # Requests on connections of their own, each answered by either process.
        for _ in range(20):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as fresh:
                assert (await fresh.get("/healthz")).status_code == 200
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
