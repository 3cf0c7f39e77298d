"""Recovery: expired leases are rescued, lost leases stop their handler, old records go."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from herald import Client, Settings, sql
from herald.client import open_connection
from herald.db import AsyncConn, conninfo, make_pool
from herald.maintenance import PRUNE_BATCH, Maintenance
from tests.eventually import eventually
from tests.support import APP, running_worker, wait_for_job


@pytest.fixture
async def pool(settings: Settings) -> AsyncIterator[AsyncConnectionPool[AsyncConn]]:
    assert settings.database_url is not None
    p = make_pool(conninfo(settings.database_url, settings.schema), 2, name="test-maintenance")
    await p.open(wait=True)
    try:
        yield p
    finally:
        await p.close()


async def _rows(client: Client, query: str, *params: Any) -> list[dict[str, Any]]:
    async with client.pool.connection() as conn:
        cur = await conn.execute(query.encode(), params or None)
        return await cur.fetchall()


async def _claim_as(
    settings: Settings, owner: str, lease_s: float, limit: int = 1, suspects: int = 1
) -> list[dict[str, Any]]:
    """Claim jobs as a worker that will never come back (it just vanishes)."""
    async with await open_connection(settings) as conn:
        cur = await conn.execute(
            sql.query("claim"),
            {
                "queues": ["default"],
                "kinds": [kind.name for kind in APP.kinds()],
                "limit": limit,
                "owner": owner,
                "lease_s": lease_s,
                "suspects": suspects,
            },
        )
        return await cur.fetchall()


async def _until(check: Callable[[], Any], what: str, limit: float = 30.0) -> None:
    """Wait for a condition; ``limit`` only guards against a hang."""

    async def holds() -> Any:
        return check()

    await eventually(holds, what=what, within=limit, interval=0.02)


async def test_rescuer_returns_expired_leases_and_dead_letters_spent_ones(
    settings: Settings, client: Client, pool: AsyncConnectionPool[AsyncConn]
) -> None:
    retried = await client.enqueue("noop", {"n": 1}, key="retried")
    spent = await client.enqueue("noop", {"n": 2}, key="spent", max_attempts=1)
    maintenance = Maintenance(APP, settings, pool)
    # Two expiries cost nothing: either job may have died of its neighbour. Each is a
    # strike; two make a suspect, and no batch holds two suspects.
    for strikes, owner in enumerate(["gone", "gone again"], start=1):
        claimed = await _claim_as(settings, owner, lease_s=0.01, limit=2, suspects=0)
        assert len(claimed) == 2
        await asyncio.sleep(0.05)  # let the two tiny leases run out
        assert await maintenance.rescue_once() == 2
        for job in (retried, spent):
            row = await client.get_job(job.id)
            assert row is not None
            assert (row.state, row.attempt, row.strikes) == ("waiting", 0, strikes)
            assert row.errors[-1]["charged"] is False
    # A worker already holding a suspect takes none; another takes one per batch.
    assert await _claim_as(settings, "busy", 0.01, limit=2, suspects=0) == []
    assert [r["id"] for r in await _claim_as(settings, "vanished", 0.01, limit=2)] == [retried.id]
    assert [r["id"] for r in await _claim_as(settings, "vanished", 0.01, limit=2)] == [spent.id]
    healthy = await client.enqueue("noop", {"n": 3})
    await _claim_as(settings, "alive", lease_s=3600.0)
    await asyncio.sleep(0.05)  # let the two tiny leases run out

    # Each was its worker's one suspect: now the expiry is charged.
    assert await maintenance.rescue_once() == 2
    assert await maintenance.rescue_once() == 0  # nothing is rescued twice
    assert (maintenance.stats.rescued, maintenance.stats.rescued_dead) == (6, 1)

    row = await client.get_job(retried.id)
    assert row is not None
    assert (row.state, row.attempt, row.rescues, row.strikes) == ("waiting", 1, 3, 2)
    assert row.lease_owner is None and row.lease_expires_at is None
    error = row.errors[-1]
    assert error["kind"] == "lease_expired" and "lease expired" in error["message"]
    assert "vanished" in error["message"]

    dead = await client.get_job(spent.id)
    assert dead is not None and (dead.state, dead.attempt) == ("dead", 1)
    assert dead.finished_at is not None
    letters = await _rows(client, "SELECT job_id, reason, errors FROM dead_letters")
    assert [(d["job_id"], d["reason"]) for d in letters] == [(spent.id, "lease_exhausted")]
    assert letters[0]["errors"][-1]["kind"] == "lease_expired"

    untouched = await client.get_job(healthy.id)
    assert untouched is not None
    assert (untouched.state, untouched.lease_owner) == ("running", "alive")

    rescues = await _rows(
        client,
        "SELECT job_id, fence, owner, outcome::text, charged FROM rescues ORDER BY job_id, id",
    )
    assert [tuple(r.values()) for r in rescues] == [
        (retried.id, 1, "gone", "waiting", False),
        (retried.id, 2, "gone again", "waiting", False),
        (retried.id, 3, "vanished", "waiting", True),
        (spent.id, 1, "gone", "waiting", False),
        (spent.id, 2, "gone again", "waiting", False),
        (spent.id, 3, "vanished", "dead", True),
    ]
    # Rescues are counted apart from handler errors: no stale writes, no handler error.
    assert await client.stale_writes() == 0

    # Expiry is judged on the database clock: "alive" holds an hour's lease, and only
    # a clock an hour and a minute on sees it run out.
    assert await maintenance.rescue_once() == 0
    async with pool.connection() as conn:
        await conn.execute("SET herald.clock_offset = '61 minutes'")
        try:
            cur = await conn.execute(sql.query("rescue"), {"limit": 10})
            assert [r["id"] for r in await cur.fetchall()] == [healthy.id]
        finally:
            await conn.execute("RESET herald.clock_offset")


async def test_a_job_of_a_vanished_worker_is_finished_by_another(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("echo", {"n": 1})
    await _claim_as(settings, "vanished", lease_s=0.01)
    # This worker's own maintenance loop rescues the job, then its fetcher runs it.
    async with running_worker(settings) as worker:
        row = await wait_for_job(client, job.id)
    # Its first expiry was not charged: it succeeds on its first charged attempt.
    assert (row["state"], row["attempt"], row["fence"]) == ("succeeded", 1, 2)
    assert row["result"] == {"echo": {"n": 1}, "attempt": 1}
    assert [e["kind"] for e in row["errors"]] == ["lease_expired"]
    assert worker.stats.succeeded == 1


async def test_a_worker_that_loses_its_lease_cancels_the_handler_and_discards_it(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("sleepy", {"sleep": 60})
    fast_heartbeat = settings.with_(heartbeat=0.1)
    async with running_worker(fast_heartbeat, maintenance=False) as worker:
        running = await wait_for_job(client, job.id, lambda r: r["state"] == "running")
        # While it runs, the heartbeat keeps pushing the lease out.
        extended = await wait_for_job(
            client, job.id, lambda r: r["lease_expires_at"] > running["lease_expires_at"]
        )
        assert extended["fence"] == 1 and extended["lease_owner"] == worker.owner

        # Another worker takes the job over (as after a rescue and a new claim).
        async with client.pool.connection() as conn:
            await conn.execute(
                "UPDATE jobs SET fence = fence + 1, lease_owner = 'thief', "
                "lease_expires_at = now() + interval '1 hour' WHERE id = %s",
                (job.id,),
            )
        await _until(lambda: worker.stats.lease_lost == 1, "the worker to notice")
        await _until(lambda: not worker._running, "the handler to be cancelled")
        assert worker.stats.succeeded == 0
    # After the worker stopped (and flushed whatever it had), the job is the thief's.
    row = await client.get_job(job.id)
    assert row is not None
    assert (row.state, row.lease_owner, row.fence, row.attempt) == (
        "running",
        "thief",
        2,
        1,
    )
    assert (row.result, row.errors) == (None, [])
    stale = await _rows(client, "SELECT fence, operation, owner FROM stale_writes")
    assert {(s["fence"], s["operation"]) for s in stale} == {(1, "heartbeat")}
    assert {s["owner"] for s in stale} == {worker.owner}


async def _finished_long_ago(conn: AsyncConn, count: int) -> None:
    """``count`` jobs finished beyond the default retention of 7 days."""
    await conn.execute(
        "INSERT INTO jobs (kind, state, attempt, finished_at) "
        "SELECT 'noop', 'succeeded', 1, now() - interval '8 days' "
        "FROM generate_series(1, %s)",
        (count,),
    )


async def test_the_worker_vacuums_the_jobs_table_its_pruning_left_dead_rows_in(
    client: Client, settings: Settings, pool: AsyncConnectionPool[AsyncConn]
) -> None:
    async with client.pool.connection() as conn:
        await _finished_long_ago(conn, 2 * PRUNE_BATCH)
    maintenance = Maintenance(APP, settings, pool)
    assert await maintenance.prune_once() + await maintenance.prune_once() == 2 * PRUNE_BATCH

    # The deletes' dead rows reach the statistics within a second or so; below the bar
    # nothing runs, past it the vacuum does (lag 0: whatever the server's autovacuum did).
    assert not await maintenance.vacuum_once(min_dead=10 * PRUNE_BATCH, lag=0)
    ran = await eventually(
        lambda: maintenance.vacuum_once(min_dead=PRUNE_BATCH // 2, lag=0),
        what="a vacuum",
        within=10,
    )
    stats = await _rows(
        client,
        "SELECT n_dead_tup, vacuum_count, autovacuum_count FROM pg_stat_user_tables "
        "WHERE relid = 'jobs'::regclass",
    )
    assert ran and maintenance.stats.vacuums == 1
    assert stats[0]["vacuum_count"] + stats[0]["autovacuum_count"] >= 1
    assert stats[0]["n_dead_tup"] < PRUNE_BATCH // 2


async def test_pruning_deletes_only_expired_finished_jobs_in_batches(
    client: Client, settings: Settings, pool: AsyncConnectionPool[AsyncConn]
) -> None:
    async with client.pool.connection() as conn:
        await _finished_long_ago(conn, PRUNE_BATCH + PRUNE_BATCH // 2)  # 1.5 batches
        await conn.execute(
            "INSERT INTO jobs (kind, key, state, attempt, finished_at, created_at) VALUES "
            "('noop', 'recent', 'succeeded', 1, now() - interval '1 day', now()), "
            "('noop', 'unfinished', 'waiting', 0, NULL, now() - interval '30 days'), "
            "('noop', 'dead-old', 'dead', 3, now() - interval '8 days', now()), "
            "('keeper', 'published', 'succeeded', 1, now() - interval '400 days', now()), "
            "('brief', 'expired', 'succeeded', 1, now() - interval '2 minutes', now()), "
            "('brief', 'fresh', 'succeeded', 1, now() - interval '10 seconds', now())"
        )
        await conn.execute(
            "INSERT INTO idempotency_keys (key, job_id, fingerprint, created_at, expires_at) "
            "VALUES ('old', 1, 'f', now() - interval '2 days', now() - interval '1 day'), "
            "('new', 2, 'f', now(), now() + interval '1 day')"
        )
        await conn.execute(
            "INSERT INTO stale_writes (job_id, fence, operation, at) VALUES "
            "(1, 1, 'heartbeat', now() - interval '8 days'), (2, 1, 'heartbeat', now())"
        )
    maintenance = Maintenance(APP, settings, pool)
    first = await maintenance.prune_once()
    second = await maintenance.prune_once()
    third = await maintenance.prune_once()
    # Oldest first, one bounded batch per call.
    assert (first, second, third) == (PRUNE_BATCH, PRUNE_BATCH // 2 + 2, 0)
    left = await _rows(client, "SELECT kind, key FROM jobs ORDER BY kind, key")
    assert [(r["kind"], r["key"]) for r in left] == [
        ("brief", "fresh"),
        ("keeper", "published"),
        ("noop", "recent"),
        ("noop", "unfinished"),
    ]
    keys = await _rows(client, "SELECT key FROM idempotency_keys")
    assert [k["key"] for k in keys] == ["new"]
    stale = await _rows(client, "SELECT job_id FROM stale_writes")
    assert [s["job_id"] for s in stale] == [2]

    # Much later on the database clock: still nothing of the kept-forever kind goes.
    async with pool.connection() as conn:
        await conn.execute("SET herald.clock_offset = '3650 days'")
        try:
            cur = await conn.execute(
                sql.query("prune_jobs"),
                {"kinds": ["keeper"], "retention_s": [-1.0], "default_s": 1.0, "limit": 100},
            )
            assert cur.rowcount == 2
        finally:
            await conn.execute("RESET herald.clock_offset")
    left = await _rows(client, "SELECT kind, key FROM jobs ORDER BY kind, key")
    assert [(r["kind"], r["key"]) for r in left] == [
        ("keeper", "published"),
        ("noop", "unfinished"),
    ]


async def test_graceful_stop_finishes_short_jobs_and_hands_long_ones_back(
    settings: Settings, client: Client
) -> None:
    """Nothing waits for a lease to run out after a clean stop."""
    short = await client.enqueue("sleepy", {"sleep": 0.3})
    long = await client.enqueue("sleepy", {"sleep": 60})
    worker_settings = settings.with_(shutdown_grace=1.5)
    async with running_worker(worker_settings, maintenance=False) as worker:
        for job in (short, long):
            await wait_for_job(client, job.id, lambda r: r["state"] != "waiting")
        assert worker.stats.claimed == 2
    # Leaving the block stopped the worker once (a graceful stop) and waited for it.
    done = await client.get_job(short.id)
    assert done is not None and (done.state, done.attempt) == ("succeeded", 1)
    back = await client.get_job(long.id)
    assert back is not None
    assert (back.state, back.attempt, back.lease_owner) == ("waiting", 1, None)
    assert [e["kind"] for e in back.errors] == ["shutdown"]
    assert back.run_at <= (await _rows(client, "SELECT now() AS t"))[0]["t"]


async def test_a_result_finished_after_the_lease_was_taken_is_discarded(
    settings: Settings, client: Client
) -> None:
    """The handler ends before any heartbeat notices: its completion is a stale write."""
    job = await client.enqueue("sync_sleep", {"sleep": 2.0})
    slow_heartbeat = settings.with_(lease=30.0)  # first heartbeat only after 10 s
    async with running_worker(slow_heartbeat, maintenance=False) as worker:
        await wait_for_job(client, job.id, lambda r: r["state"] == "running")
        async with client.pool.connection() as conn:
            await conn.execute(
                "UPDATE jobs SET fence = fence + 1, lease_owner = 'thief' WHERE id = %s",
                (job.id,),
            )
        await _until(lambda: worker.stats.stale_writes == 1, "the refused completion")
        assert worker.stats.succeeded == 0
    row = await client.get_job(job.id)
    assert row is not None
    assert (row.state, row.lease_owner, row.fence, row.result) == (
        "running",
        "thief",
        2,
        None,
    )
    stale = await _rows(client, "SELECT fence, operation, owner FROM stale_writes")
    assert stale == [{"fence": 1, "operation": "succeeded", "owner": worker.owner}]


async def test_a_job_of_a_kind_this_worker_does_not_know_waits_uncharged(
    settings: Settings, client: Client
) -> None:
    """Written by a newer release (or by hand): the worker leaves it for one that knows
    the kind, without charging an attempt; it stays visible as waiting work."""
    async with client.pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO jobs (kind, max_attempts) VALUES ('ghost', 1) RETURNING id"
        )
        row = await cur.fetchone()
    assert row is not None
    known = await client.enqueue("echo", {"n": 1})
    async with running_worker(settings):
        assert (await wait_for_job(client, known.id))["state"] == "succeeded"
        ghost = await client.get_job(row["id"])
    assert ghost is not None and (ghost.state, ghost.attempt) == ("waiting", 0)
    stats = {s.queue: s for s in await client.queue_stats()}
    assert stats["default"].available == 1
