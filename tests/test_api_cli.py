"""The command line: ``herald apikey``, ``herald up`` (API, worker, scheduler,
housekeeping in one process), the help, and where --app may stand."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from herald.api import create_key
from herald.api.auth import hash_token
from herald.cli import _parser, main
from herald.client import open_connection
from herald.config import Settings
from tests.eventually import eventually
from tests.procs import herald_command

ROOT = Path(__file__).resolve().parent.parent


def _env(settings: Settings) -> dict[str, str]:
    assert settings.database_url is not None
    return {"HERALD_DATABASE_URL": settings.database_url, "HERALD_SCHEMA": settings.schema}


async def test_apikey_create_prints_the_token_once_and_stores_its_hash(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in _env(settings).items():
        monkeypatch.setenv(name, value)
    argv = ["apikey", "create", "ci", "--scopes", "submit,read", "--max-active-jobs", "5"]
    assert await asyncio.to_thread(main, argv) == 0
    out = capsys.readouterr()
    token = out.out.strip()
    assert token.startswith("hrld_") and "shown once" in out.err
    async with await open_connection(settings) as conn:
        cur = await conn.execute("SELECT name, hash, scopes, max_active_jobs FROM api_keys")
        rows = await cur.fetchall()
    assert rows == [
        {
            "name": "ci",
            "hash": hash_token(token),
            "scopes": ["read", "submit"],
            "max_active_jobs": 5,
        }
    ]
    assert token not in json.dumps(rows)

    # Bad input is refused and writes nothing; a live name cannot be taken twice.
    assert await asyncio.to_thread(main, ["apikey", "create", "x", "--scopes", "root"]) == 2
    assert await asyncio.to_thread(main, ["apikey", "create", "ci", "--scopes", "read"]) == 1
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["apikey", "list"]) == 0
    listing = capsys.readouterr().out
    assert "ci\tread,submit\tquota=5\tlive" in listing and token not in listing
    assert await asyncio.to_thread(main, ["apikey", "revoke", "ci"]) == 0
    assert await asyncio.to_thread(main, ["apikey", "revoke", "ci"]) == 1


async def test_help_lists_every_command_and_shows_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        assert re.search(rf"^    {name}\s", top, re.M), name  # listed, with its help
        assert command.format_help()  # and each has its own help
    with pytest.raises(SystemExit):
        main(["up", "--help"])
    up = " ".join(capsys.readouterr().out.split())
    for shown in ("(default: 127.0.0.1)", "(default: 8000)", "(default: 10)", "(default: 5.0)"):
        assert shown in up


@pytest.mark.parametrize("command", ["worker", "scheduler", "serve", "up"])
def test_a_long_running_command_needs_an_application_named(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not the built-in catalog application by default, silently or not."""
    monkeypatch.delenv("HERALD_APP", raising=False)
    assert main([command]) == 2
    error = capsys.readouterr().err
    assert f"herald {command} runs the application you name: --app module:attr" in error
    assert "--app herald.demo:app" in error


def test_a_command_whose_extra_is_not_installed_names_the_extra(tmp_path: Path) -> None:
    """As after `pip install herald` without [api]: FastAPI cannot be imported."""
    script = (
        "import sys; sys.modules['fastapi'] = None\n"
        "from herald.cli import main\n"
        "raise SystemExit(main(['apikey', 'create', 'me', '--scopes', 'read']))\n"
    )
    env = {**os.environ, "HERALD_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "needs fastapi, of the api extra: pip install 'herald[api]'" in done.stderr


async def test_app_is_taken_after_the_command_and_one_shot_commands_print_only_results(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in _env(settings).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(ROOT)
    argv = ["enqueue", "echo", "--payload", '{"a": 1}', "--app", "tests.support:APP"]
    assert await asyncio.to_thread(main, argv) == 0
    out = capsys.readouterr()
    assert "created" in out.out and out.err == ""  # no log lines around the result
    # The default application knows no "echo": the --app above was the one used.
    assert await asyncio.to_thread(main, ["enqueue", "echo"]) == 1
    assert "unknown" in capsys.readouterr().err.lower()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start_up(settings: Settings, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    argv = ["--app", "tests.support:APP", "--json-logs", "up", "--port", str(port)]
    argv += ["--concurrency", "2", "--scheduler-interval", "0.2"]
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "herald", *argv],
            cwd=ROOT,
            env={**os.environ, **_env(settings)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


async def _until(check: Callable[[], Awaitable[bool]], what: str, within: float = 60.0) -> None:
    await eventually(check, what=what, within=within, interval=0.1)


async def _until_ready(
    http: httpx.AsyncClient,
    proc: subprocess.Popen[bytes],
    log_path: Path,
    within: float = 60.0,
) -> None:
    async def ready() -> bool:
        assert proc.poll() is None, log_path.read_text()  # noqa: ASYNC240 (on failure only)
        try:
            return (await http.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    await _until(ready, "the API to be ready", within)


async def test_up_runs_api_worker_and_scheduler_in_one_process(
    settings: Settings, tmp_path: Path
) -> None:
    async with await open_connection(settings) as conn:
        token = (await create_key(conn, "demo", ["admin"])).token
        await conn.execute(
            "INSERT INTO schedules (kind, key, frequency, timezone, at_time, next_due_at)"
            " VALUES ('noop', 'nightly', 'daily', 'UTC', '03:00', herald_now() - interval '1 day')"
        )
    port = _free_port()
    log_path = tmp_path / "up.log"
    proc = _start_up(settings, port, log_path)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=auth) as http:
            await _until_ready(http, proc, log_path)
            submitted = await http.post("/v1/jobs", json={"kind": "echo", "payload": {"a": 1}})
            assert submitted.status_code == 202
            job_url = submitted.headers["location"]

            async def finished() -> bool:
                return bool((await http.get(job_url)).json()["state"] == "succeeded")

            await _until(finished, "the job to succeed")
            job = (await http.get(job_url)).json()
            assert job["result"] == {"echo": {"a": 1}, "attempt": 1}

            async def fired() -> bool:
                jobs = (await http.get("/v1/jobs", params={"kind": "noop"})).json()
                return len(jobs) == 1 and jobs[0]["key"] == "nightly"

            await _until(fired, "the overdue schedule to fire")
            metrics = (await http.get("/metrics")).text
            assert (
                'herald_handler_duration_seconds_count{kind="echo",outcome="succeeded"} 1.0'
                in metrics
            )
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 60)
        output = log_path.read_text()
        assert code == 0, output
        lines = [json.loads(line) for line in output.splitlines() if line.strip()]
        messages = [entry["message"] for entry in lines]
        assert any(m.startswith("herald up: API on http://127.0.0.1") for m in messages)
        assert any("stopped" in m for m in messages)
        assert any("took over" in m and "cleanup:" in m for m in messages)  # housekeeping
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
async def test_the_embedded_database_is_announced_once(tmp_path: Path) -> None:
    """A one-shot command prints its result only (here: the token to copy); a long-running
    one logs where its embedded PostgreSQL is, once, however many pools it opens."""
    env = {k: v for k, v in os.environ.items() if k != "HERALD_DATABASE_URL"}
    env["HERALD_DATA_DIR"] = str(tmp_path / "data")

    migrated = await asyncio.to_thread(herald_command, env, "migrate", timeout=300)
    assert migrated.returncode == 0 and migrated.stderr == "", migrated.stderr
    argv = ("apikey", "create", "me", "--scopes", "read")
    created = await asyncio.to_thread(herald_command, env, *argv)
    assert created.returncode == 0, created.stderr
    assert re.fullmatch(r"hrld_\S+\n", created.stdout)
    assert "embedded PostgreSQL" not in created.stderr
    port = _free_port()
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as log:
        proc = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "herald", "up", "--port", str(port), "--app", "herald.demo:app"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            await _until_ready(http, proc, log_path, within=300)
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 60)
    output = log_path.read_text()
    assert output.count("using embedded PostgreSQL") == 1, output
