"""``herald serve --reuse-port``: several API processes share one port."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
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


@pytest.mark.slow
async def test_processes_started_with_reuse_port_share_it(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    procs = [_serve(port, settings, tmp_path / f"api{i}.log", "--reuse-port") for i in (0, 1)]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            await answering(http, "/healthz", procs[:1], tmp_path / "api0.log")
        await asyncio.sleep(2)  # the second process has bound too, or failed to
        logs = [tmp_path / f"api{i}.log" for i in (0, 1)]
        assert [p.poll() for p in procs] == [None, None], [log.read_text() for log in logs]
        # Requests on connections of their own, each answered by either process.
        for _ in range(20):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as fresh:
                assert (await fresh.get("/healthz")).status_code == 200
        # Without the option a third process cannot bind the port and says so.
        alone = _serve(port, settings, tmp_path / "api-alone.log")
        assert alone.wait(60) != 0
        assert "address already in use" in (tmp_path / "api-alone.log").read_text().lower()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
