"""Ingestion with real worker processes: parallel triggers, four workers sharing a large
run, a worker SIGKILLed mid-batch. Slow: each test starts processes."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald.client import Client
from herald.config import Settings
from herald.db import AsyncConn
from herald.ingest.processing import drain_run
from herald.ingest.providers import PROCESS, request_fetch
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec
from tests.ingest.harness import add_provider, canonical, ingest_app, open_conn, stage_snapshot
from tests.procs import Workers, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
APP = ("--app", "tests.ingest.apps:app")


@pytest.fixture
async def conn(settings: Settings) -> AsyncIterator[AsyncConn]:
    async with await open_conn(settings) as connection:
        yield connection


def workers(settings: Settings, tmp_path: Path, **env: str) -> Workers:
    assert settings.database_url is not None
    return Workers(settings, settings.database_url, tmp_path, env)


async def _run_state(conn: AsyncConn, run_id: int) -> str:
    cur = await conn.execute("SELECT state FROM ingest_runs WHERE id = %s", (run_id,))
    row = await cur.fetchone()
    assert row is not None
    return str(row["state"])


async def test_eight_parallel_triggers_make_one_run_and_providers_fetch_in_parallel(
    settings: Settings, conn: AsyncConn, tmp_path: Path
) -> None:
    app = ingest_app(settings)
    spec = SnapshotSpec(seed=1, plans=3000)
    feeds = {name: FeedConfig(spec=spec, latency=1.0) for name in ("a", "b")}
    group = workers(settings, tmp_path)
    async with Sandbox(feeds) as sandbox:
        for name in feeds:
            await add_provider(conn, name, sandbox.feed_url(name))
        for _ in range(2):
            group.start(*APP, concurrency=8)
        try:
            clients = [await Client.open(app, settings) for _ in range(8)]
            try:
                admitted = await asyncio.gather(
                    *(request_fetch(c, p) for c in clients for p in ("a", "b"))
                )
            finally:
                for client in clients:
                    await client.close()
            assert len({a.id for a in admitted}) == 2  # one fetch job per provider

            async def both_processed() -> bool:
                cur = await conn.execute("SELECT state FROM ingest_runs")
                states = [r["state"] for r in await cur.fetchall()]
                return len(states) == 2 and set(states) == {"processed"}

            await wait_for(both_processed, 120, "both runs processed", group)
        finally:
            group.stop_all()
        assert sandbox.requests("a") == sandbox.requests("b") == 1
    cur = await conn.execute("SELECT provider, started_at, staged_at FROM ingest_runs")
    runs = {r["provider"]: r for r in await cur.fetchall()}
    # The two providers' fetches overlapped in time: one did not wait for the other.
    assert runs["a"]["started_at"] < runs["b"]["staged_at"]
    assert runs["b"]["started_at"] < runs["a"]["staged_at"]


async def test_four_worker_processes_share_a_200k_row_run_and_no_row_runs_twice(
    settings: Settings, conn: AsyncConn, tmp_path: Path
) -> None:
    app = ingest_app(settings)
    await add_provider(conn, "big", "http://127.0.0.1:9/")
    spec = SnapshotSpec(seed=3, plans=200_000, zones=3, plans_per_base=4)
    run_id = await stage_snapshot(conn, "big", spec, 1, batch=10_000)
    async with await Client.open(app, settings) as client:
        for slot in range(4):
            await client.enqueue(PROCESS, {"run_id": run_id}, key=f"run:{run_id}:{slot}")
    group = workers(settings, tmp_path, HERALD_INGEST_BATCH="500")
    for _ in range(4):
        group.start(*APP, "--queues", "ingest-process", concurrency=1)
    try:

        async def processed() -> bool:
            return await _run_state(conn, run_id) == "processed"

        await wait_for(processed, 600, "the run processed", group, interval=0.5)
    finally:
        group.stop_all()
    cur = await conn.execute(
        "SELECT state, count(*) AS n, max(attempts) AS most, min(attempts) AS least "
        "FROM ingest_staged WHERE run_id = %s GROUP BY state",
        (run_id,),
    )
    rows = await cur.fetchall()
    assert rows == [{"state": "done", "n": 200_000, "most": 1, "least": 1}]
    # Each row was claimed once (attempts = 1), by the worker its claim token names.
    cur = await conn.execute(
        "SELECT split_part(claimed_by, '/', 1) AS worker, count(*) AS n FROM ingest_staged "
        "WHERE run_id = %s GROUP BY 1",
        (run_id,),
    )
    shares = {r["worker"]: r["n"] for r in await cur.fetchall()}
    assert len(shares) == 4 and sum(shares.values()) == 200_000
    assert min(shares.values()) > 10_000  # every process took a real share
    assert len(await canonical(conn, "big")) == 200_000


async def _held_rows(conn: AsyncConn, run_id: int) -> list[int]:
    """Rows of the run locked by a batch in flight elsewhere: pending, yet not lockable."""
    async with conn.transaction(force_rollback=True):
        cur = await conn.execute(
            "SELECT id FROM ingest_staged WHERE run_id = %s AND state = 'pending' AND id NOT IN "
            "(SELECT id FROM ingest_staged WHERE run_id = %s AND state = 'pending' "
            "FOR UPDATE SKIP LOCKED) ORDER BY id",
            (run_id, run_id),
        )
        return [r["id"] for r in await cur.fetchall()]


async def test_a_worker_killed_mid_batch_leaves_its_rows_to_another_worker(
    settings: Settings, conn: AsyncConn, tmp_path: Path
) -> None:
    app = ingest_app(settings)
    await add_provider(conn, "victim", "http://127.0.0.1:9/")
    await add_provider(conn, "control", "http://127.0.0.1:9/")
    spec = SnapshotSpec(seed=5, plans=30_000, plans_per_base=3)
    run_id = await stage_snapshot(conn, "victim", spec, 1, batch=10_000)
    async with await Client.open(app, settings) as client:
        await client.enqueue(PROCESS, {"run_id": run_id}, key=f"run:{run_id}:0")
    stuck_after = 8.0
    group = workers(
        settings,
        tmp_path,
        HERALD_INGEST_BATCH="1000",
        HERALD_INGEST_STUCK_AFTER=str(stuck_after),
        HERALD_INGEST_DUTY_EVERY="0.5",
    )
    first = group.start(*APP, "--queues", "ingest-process", concurrency=1)
    try:

        async def mid_batch() -> list[int]:
            cur = await conn.execute(
                "SELECT count(*) AS n FROM ingest_staged WHERE run_id = %s AND state = 'done'",
                (run_id,),
            )
            done = (await cur.fetchone() or {"n": 0})["n"]
            return await _held_rows(conn, run_id) if done >= 4000 else []

        # Frozen first, so what it holds cannot change (a commit needs the client), then
        # killed. Frozen between two batches, it holds nothing: let it go on and freeze
        # it again.
        orphans: list[int] = []
        for _ in range(50):
            await wait_for(mid_batch, 120, "a batch in flight", group, interval=0.01)
            first.signal(signal.SIGSTOP)
            await asyncio.sleep(0.3)
            orphans = await _held_rows(conn, run_id)
            if orphans:
                break
            first.signal(signal.SIGCONT)
        first.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        first.proc.wait(10)
        assert orphans, "the kill should have left a batch in flight behind"
        group.start(*APP, "--queues", "ingest-process", concurrency=1)

        async def orphans_done() -> bool:
            cur = await conn.execute(
                "SELECT count(*) AS n FROM ingest_staged WHERE id = ANY(%s) AND state = 'done'",
                (orphans,),
            )
            return bool((await cur.fetchone() or {"n": 0})["n"] == len(orphans))

        await wait_for(orphans_done, 120, "the orphaned rows processed", group)
        recovered_in = time.monotonic() - killed_at

        async def processed() -> bool:
            return await _run_state(conn, run_id) == "processed"

        await wait_for(processed, 300, "the run processed", group, interval=0.5)
    finally:
        group.stop_all()
    # The killed batch rolled back: its rows were pending again at once, so the bound is
    # the job's rescue (stuck_after plus a duty pass) and process start-up.
    assert recovered_in < stuck_after + 30
    cur = await conn.execute(
        "SELECT attempts, state, last_error FROM ingest_staged WHERE id = ANY(%s)", (orphans,)
    )
    for row in await cur.fetchall():
        # The killed attempt left nothing behind, not even a counted attempt.
        assert row["attempts"] == 1 and row["state"] == "done" and row["last_error"] is None
    control = await stage_snapshot(conn, "control", spec, 1, batch=10_000)
    await drain_run(conn, control, "control", batch=5000, poll=0.05)
    fields = (
        "title",
        "starts_at",
        "ends_at",
        "sell_mode",
        "ever_online",
        "min_price",
        "max_price",
        "zones",
    )
    victim = {k: tuple(r[f] for f in fields) for k, r in (await canonical(conn, "victim")).items()}
    clean = {k: tuple(r[f] for f in fields) for k, r in (await canonical(conn, "control")).items()}
    assert victim == clean and len(victim) == 30_000
