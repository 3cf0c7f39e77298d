"""``herald ingest``: providers, fetch, runs, run detail and quarantine from the command line."""

from __future__ import annotations

import json

import pytest

from herald.cli import main
from herald.config import Settings
from herald.ingest.processing import drain_run
from herald.ingest.sandbox import SnapshotSpec
from herald.ops.crypto import TokenCipher
from tests.ingest.harness import open_conn, stage_snapshot


@pytest.fixture
def env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    assert settings.database_url is not None
    monkeypatch.setenv("HERALD_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("HERALD_SCHEMA", settings.schema)
    monkeypatch.setenv("HERALD_TOKEN_KEYS", TokenCipher.generate_key())
    return settings


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def test_providers_are_registered_updated_and_listed_without_their_secret(
    env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_TOKEN", "Bearer very-secret")
    status, out, _ = await _in_thread(
        capsys, "ingest", "providers", "add", "acme", "--url", "http://127.0.0.1:9/feeds/acme",
        "--auth-env", "ACME_TOKEN", "--schedule", "0 3 * * *", "--reason", "onboarding",
    )  # fmt: skip
    assert status == 0 and "registered provider acme" in out and "with an auth header" in out
    status, out, _ = await _in_thread(
        capsys, "ingest", "providers", "update", "acme", "--read-timeout", "5"
    )
    assert status == 0 and "updated provider acme" in out and "with an auth header" in out
    status, out, _ = await _in_thread(capsys, "ingest", "providers", "list")
    assert status == 0 and "acme" in out and "very-secret" not in out
    async with await open_conn(env) as conn:
        cur = await conn.execute("SELECT read_timeout, schedule_id FROM ingest_providers")
        row = await cur.fetchone()
        assert row is not None and row["read_timeout"] == 5 and row["schedule_id"] is not None
        cur = await conn.execute("SELECT kind, key, cron FROM schedules")
        assert await cur.fetchall() == [
            {"kind": "ingest.fetch", "key": "acme", "cron": "0 3 * * *"}
        ]
    status, _, err = await _in_thread(
        capsys, "ingest", "providers", "add", "bad name", "--url", "http://x.test/"
    )
    assert status == 2 and "provider name" in err
    status, out, _ = await _in_thread(capsys, "ingest", "fetch", "acme")
    assert status == 0 and "fetch requested" in out
    status, out, _ = await _in_thread(capsys, "ingest", "fetch", "acme")
    assert status == 0 and "already in progress" in out


async def test_runs_run_detail_and_quarantine(
    env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, _ = await _in_thread(
        capsys, "ingest", "providers", "add", "acme", "--url", "http://127.0.0.1:9/feeds/acme"
    )
    assert status == 0
    async with await open_conn(env) as conn:
        spec = SnapshotSpec(seed=2, plans=120, malformed_every=40)
        run_id = await stage_snapshot(conn, "acme", spec, 1)
        await drain_run(conn, run_id, "w", poll=0.01)
    status, out, _ = await _in_thread(capsys, "ingest", "runs")
    assert status == 0 and "processed" in out and str(run_id) in out
    status, out, _ = await _in_thread(capsys, "ingest", "run", str(run_id))
    detail = json.loads(out)
    assert detail["state"] == "processed" and detail["rows_by_state"] == {"done": 117}
    status, out, _ = await _in_thread(capsys, "ingest", "quarantine", "--run", str(run_id))
    assert status == 0 and len(out.splitlines()) == 2 + detail["quarantined"]
    status, _, err = await _in_thread(capsys, "ingest", "run", "424242")
    assert status == 1 and "no run 424242" in err


async def _in_thread(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI runs its own event loop: run it off this test's loop."""
    import asyncio

    return await asyncio.to_thread(run, capsys, *argv)
