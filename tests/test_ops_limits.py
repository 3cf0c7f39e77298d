"""Rate limits (shared token buckets) and concurrency limits (slots per key)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from herald import Client, Herald, JobContext, JobSpec, Settings, Snooze, Worker
from herald.db import AsyncConn, connect, conninfo, make_pool
from herald.maintenance import Maintenance
from herald.ops import limits
from tests.eventually import eventually

RATE = 5.0
BURST = 5.0


@contextlib.asynccontextmanager
async def workers(
    app: Herald, settings: Settings, count: int, **options: Any
) -> AsyncIterator[list[Worker]]:
    """``count`` in-process workers on one schema; maintenance on the first only."""
    started = [
        Worker(app, settings=settings, maintenance=i == 0, name=f"w{i}", **options)
        for i in range(count)
    ]
    tasks = [asyncio.create_task(w.run()) for w in started]
    try:
        await asyncio.wait_for(asyncio.gather(*(w.ready.wait() for w in started)), 30)
        yield started
    finally:
        for w in started:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)


async def _db(settings: Settings) -> AsyncConn:
    assert settings.database_url is not None
    return await connect(conninfo(settings.database_url, settings.schema))


async def _shift_clock(conn: AsyncConn, seconds: float) -> None:
    await conn.execute("SELECT set_config('herald.clock_offset', %s, false)", (f"{seconds} s",))


async def test_bucket_grants_its_burst_then_says_how_long_to_wait(settings: Settings) -> None:
    async with await _db(settings) as conn:
        await _shift_clock(conn, 0)
        granted = [await limits.acquire(conn, "acct:1", rate=2, burst=3) for _ in range(3)]
        assert granted == sorted(granted)
        with pytest.raises(Snooze) as refused:
            await limits.acquire(conn, "acct:1", rate=2, burst=3)
        # Refill of 2/s: the next token is at most half a second away (less once the
        # clock has moved on since the last grant), and asking again took nothing.
        assert 0 < refused.value.seconds <= 0.5
        await _shift_clock(conn, 0.5)
        await limits.acquire(conn, "acct:1", rate=2, burst=3)
        # A long quiet spell refills to the burst, never beyond it.
        await _shift_clock(conn, 3600)
        for _ in range(3):
            await limits.acquire(conn, "acct:1", rate=2, burst=3)
        with pytest.raises(Snooze):
            await limits.acquire(conn, "acct:1", rate=2, burst=3)
        # Another key has a bucket of its own.
        await limits.acquire(conn, "acct:2", rate=2, burst=3)
        stats = {r.key: r for r in await limits.rate_stats(conn)}
        assert stats["acct:1"].granted == 7
        assert stats["acct:1"].denied == 2
        assert stats["acct:2"].granted == 1


async def test_bad_limits_are_refused_and_write_nothing(settings: Settings) -> None:
    async with await _db(settings) as conn:
        for key, rate, burst in [("", 1, 1), ("k", 0, 1), ("k", -1, 1), ("k", 1, 0.5)]:
            with pytest.raises(ValueError):
                await limits.acquire(conn, key, rate=rate, burst=burst)
        cur = await conn.execute("SELECT count(*) AS n FROM rate_limits")
        assert (await cur.fetchone() or {})["n"] == 0
    with pytest.raises(ValueError):
        limits.ConcurrencyLimit(0)
    with pytest.raises(ValueError):
        limits.RateLimit(rate=0)
    with pytest.raises(ValueError, match="not registered"):
        limits.declare(Herald(), "nope", concurrency=limits.ConcurrencyLimit(1))


@pytest.mark.slow
async def test_eight_workers_share_one_limiter_of_5_per_second(settings: Settings) -> None:
    """Over 10 s of database time, no window [a, b] holds more than 5/s * (b - a) + 5
    grants, measured with the database timestamps of the grants."""
    app = Herald()
    grants: list[datetime] = []

    @app.task("limited_call")
    async def limited_call(ctx: JobContext, payload: dict[str, Any]) -> None:
        grants.append(await limits.acquire(ctx, "downstream", RATE, BURST))

    settings = settings.with_(pool_size=2)
    async with await Client.open(app, settings) as client:
        ids = [e.id for e in await client.enqueue_many([JobSpec("limited_call")] * 120)]
        async with workers(app, settings, 8, concurrency=2), await _db(settings) as conn:

            async def ten_seconds_granted() -> bool:
                return bool(grants) and (await _db_now(conn) - min(grants)).total_seconds() >= 10

            await eventually(ten_seconds_granted, what="10 s of grants", within=60, interval=0.25)
        rows = [await client.get_job(i) for i in ids]
        async with await _db(settings) as conn:
            cur = await conn.execute("SELECT granted FROM rate_limits WHERE key = 'downstream'")
            counted = (await cur.fetchone() or {})["granted"]

    assert counted == len(grants)  # every token the database gave out was recorded
    times = sorted((g - min(grants)).total_seconds() for g in grants)
    assert len(times) > BURST  # the bucket was refilled, not just emptied
    for i in range(len(times)):
        for j in range(i, len(times)):
            assert j - i + 1 <= RATE * (times[j] - times[i]) + BURST + 1e-6, (i, j, times)
    in_ten = [t for t in times if t <= 10.0]
    assert len(in_ten) <= RATE * 10 + BURST
    done = [r for r in rows if r is not None and r.state == "succeeded"]
    assert len(done) == len(grants)
    # Waiting for a token is a snooze, never an attempt.
    assert all(r.attempt == 1 for r in done)
    assert sum(r.snoozes for r in rows if r is not None) > 0


async def _db_now(conn: AsyncConn) -> datetime:
    cur = await conn.execute("SELECT herald_now() AS now")
    row = await cur.fetchone()
    assert row is not None
    now: datetime = row["now"]
    return now


async def test_concurrency_limit_of_one_per_key_under_four_workers(settings: Settings) -> None:
    """Jobs of the same account never overlap in time; other accounts run alongside."""
    app = Herald()
    intervals: list[tuple[str, datetime, datetime]] = []
    all_ran = asyncio.Event()

    async with await _db(settings) as clock:

        async def db_time() -> datetime:
            cur = await clock.execute("SELECT clock_timestamp() AS t")
            row = await cur.fetchone()
            assert row is not None
            t: datetime = row["t"]
            return t

        lock = asyncio.Lock()  # the clock connection is shared by every handler

        @app.task("per_account")
        async def per_account(ctx: JobContext, payload: dict[str, Any]) -> None:
            async with lock:
                start = await db_time()
            await asyncio.sleep(0.05)
            async with lock:
                end = await db_time()
            intervals.append((payload["account"], start, end))
            if len(intervals) == 16:
                all_ran.set()

        limits.declare(
            app,
            "per_account",
            concurrency=limits.ConcurrencyLimit(
                1, key=lambda p: f"account:{p['account']}", retry_after=0.05
            ),
        )
        settings = settings.with_(pool_size=2)
        async with await Client.open(app, settings) as client:
            specs = [JobSpec("per_account", {"account": "ab"[i % 2]}) for i in range(16)]
            ids = [e.id for e in await client.enqueue_many(specs)]
            async with workers(app, settings, 4, concurrency=3):
                await asyncio.wait_for(all_ran.wait(), 60)  # a hang guard only

                async def all_succeeded() -> bool:
                    rows = [await client.get_job(i) for i in ids]
                    return all(r and r.state == "succeeded" for r in rows)

                await eventually(all_succeeded, what="every job to succeed", within=60)
                rows = [await client.get_job(i) for i in ids]

    assert len(intervals) == len(ids)
    for account in "ab":
        mine = sorted((s, e) for a, s, e in intervals if a == account)
        assert len(mine) == 8
        for (_, end), (start, _) in itertools.pairwise(mine):
            assert end <= start, f"two jobs of account {account} overlapped"
    assert all(r is not None and r.attempt == 1 for r in rows)
    assert sum(r.snoozes for r in rows if r is not None) > 0


async def test_a_kind_declared_rate_limit_snoozes_before_the_handler(settings: Settings) -> None:
    app = Herald()
    ran: list[int] = []
    all_ran = asyncio.Event()

    @app.task("declared")
    async def declared(ctx: JobContext, payload: dict[str, Any]) -> None:
        ran.append(ctx.job_id)
        if len(ran) == 4:
            all_ran.set()

    limits.declare(app, "declared", rate=limits.RateLimit(rate=20, burst=1))
    async with await Client.open(app, settings) as client:
        ids = [e.id for e in await client.enqueue_many([JobSpec("declared")] * 4)]
        async with workers(app, settings, 1, concurrency=4):
            await asyncio.wait_for(all_ran.wait(), 30)  # a hang guard only
        rows = [await client.get_job(i) for i in ids]
    assert sorted(ran) == sorted(ids)  # each handler ran exactly once
    assert all(r is not None and r.attempt == 1 for r in rows)
    assert sum(r.snoozes for r in rows if r is not None) >= 3  # one token at a time


async def test_the_pruner_deletes_free_slots_and_idle_full_buckets_only(
    settings: Settings,
) -> None:
    """Limiter state of keys nobody uses any more does not pile up forever."""
    async with await _db(settings) as conn:
        # Two running attempts (ids 1, 2 under fence 1) and one that finished (id 3).
        await conn.execute(
            "INSERT INTO jobs (id, kind, state, attempt, fence, lease_owner, lease_expires_at) "
            "OVERRIDING SYSTEM VALUE "
            "SELECT g, 'k', 'running', 1, 1, 'w', now() + interval '1 hour' "
            "FROM generate_series(1, 2) g"
        )
        await conn.execute(
            "INSERT INTO jobs (id, kind, state, attempt, fence, finished_at) "
            "OVERRIDING SYSTEM VALUE VALUES (3, 'k', 'succeeded', 1, 1, now())"
        )
        await limits.acquire_slot(conn, "held", 2, job_id=1, fence=1)
        await limits.acquire_slot(conn, "held", 2, job_id=3, fence=1)  # taken, then freed
        await limits.acquire_slot(conn, "stale-fence", 1, job_id=2, fence=1)
        await conn.execute("UPDATE jobs SET fence = 2 WHERE id = 2")  # re-claimed since
        await limits.acquire_slot(conn, "gone", 1, job_id=3, fence=1)
        for key in ("idle", "busy", "recent"):
            await limits.acquire(conn, key, rate=1, burst=2)
        # "idle" was last used 8 days ago and is full again; "busy" was drained just
        # before going quiet 8 days ago at a rate that cannot have refilled it.
        await conn.execute(
            "UPDATE rate_limits SET updated_at = now() - interval '8 days' "
            "WHERE key IN ('idle', 'busy')"
        )
        await conn.execute("UPDATE rate_limits SET tokens = 0, rate = 1e-9 WHERE key = 'busy'")

    pool = make_pool(conninfo(str(settings.database_url), settings.schema), 2)
    await pool.open()
    try:
        maintenance = Maintenance(Herald(), settings, pool)
        await maintenance.prune_hooks_once()  # the installed hook, through its entry point
    finally:
        await pool.close()

    async with await _db(settings) as conn:
        cur = await conn.execute("SELECT key, job_id FROM concurrency_slots ORDER BY key, slot")
        assert [(r["key"], r["job_id"]) for r in await cur.fetchall()] == [("held", 1)]
        cur = await conn.execute("SELECT key FROM rate_limits ORDER BY key")
        assert [r["key"] for r in await cur.fetchall()] == ["busy", "recent"]
        # The deleted state changes no decision: the free slot is taken again at once.
        assert await limits.acquire_slot(conn, "gone", 1, job_id=1, fence=1) == 0
    assert maintenance.stats.pruned_by_hook == {"limits": 4}
