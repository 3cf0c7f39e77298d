"""Fetch, stage and process against a real sandbox and a real PostgreSQL, end to end."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal

from herald import sql
from herald.client import Client, Outcome
from herald.config import Settings
from herald.ingest.providers import request_fetch
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec, expected_snapshot
from herald.metrics import HeraldMetrics
from tests.ingest.harness import (
    add_provider,
    canonical,
    ingest_app,
    open_conn,
    running_worker,
    wait_for_job,
    wait_for_run,
)


async def test_a_snapshot_is_fetched_staged_and_processed_into_canonical_plans(
    settings: Settings,
) -> None:
    spec = SnapshotSpec(seed=3, plans=900, zones=3, plans_per_base=2, malformed_every=97)
    app = ingest_app(settings)
    async with (
        Sandbox({"acme": FeedConfig(spec=spec)}) as sandbox,
        await Client.open(app, settings) as client,
        await open_conn(settings) as conn,
    ):
        await add_provider(conn, "acme", sandbox.feed_url("acme"))
        admitted = await request_fetch(client, "acme")
        async with running_worker(app, settings):
            fetched = await wait_for_job(client, admitted.id)
            assert fetched["state"] == "succeeded", fetched["errors"]
            run = await wait_for_run(conn, fetched["result"]["run_id"], ("processed",))
        expected = expected_snapshot(spec, 1)
        found = await canonical(conn, "acme")
        assert set(found) == set(expected)
        for identity, plan in expected.items():
            row = found[identity]
            assert row["title"] == plan.title
            assert row["starts_at"] == plan.starts_at.replace(tzinfo=dt.UTC)
            assert row["ends_at"] == plan.ends_at.replace(tzinfo=dt.UTC)
            assert row["ever_online"] == plan.online
            assert row["min_price"] == min(plan.prices) and row["max_price"] == max(plan.prices)
            assert [Decimal(str(z["price"])) for z in row["zones"]] == list(plan.prices)
            assert row["first_seen_at"] == row["last_seen_at"] == run["snapshot_at"]
        assert run["rows_staged"] == len(expected) == run["rows_done"]
        assert run["rows_failed"] == 0 and run["rejected"] > 0
        metrics = HeraldMetrics()
        await metrics.refresh(client.pool)
        text = metrics.render().decode()
        assert 'herald_ingest_runs{provider="acme",state="processed"} 1.0' in text
        assert (
            f'herald_ingest_rows_processed{{outcome="done",provider="acme"}} {len(expected)}.0'
            in text
        )
        assert f'herald_ingest_quarantined{{provider="acme"}} {run["rejected"]}.0' in text
        cur = await conn.execute(
            "SELECT count(*) AS n FROM ingest_quarantine WHERE run_id = %s", (run["id"],)
        )
        assert (await cur.fetchone() or {})["n"] == run["rejected"]


async def test_a_second_trigger_while_one_is_active_returns_the_active_fetch(
    settings: Settings,
) -> None:
    app = ingest_app(settings)
    async with await Client.open(app, settings) as client, await open_conn(settings) as conn:
        await add_provider(conn, "acme", "http://127.0.0.1:9/feeds/acme")
        first = await request_fetch(client, "acme")
        second = await request_fetch(client, "acme")
        assert first.outcome is Outcome.CREATED and second.outcome is Outcome.IN_PROGRESS
        assert second.id == first.id


async def test_a_fetch_waits_while_another_attempt_still_holds_the_provider(
    settings: Settings,
) -> None:
    """An attempt that lost its lease but still runs keeps the provider's lock: a newer
    attempt snoozes instead of fetching beside it, then runs once the lock is free."""
    spec = SnapshotSpec(seed=2, plans=50)
    app = ingest_app(settings)
    async with (
        Sandbox({"acme": FeedConfig(spec=spec)}) as sandbox,
        await Client.open(app, settings) as client,
        await open_conn(settings) as conn,
        await open_conn(settings) as zombie,
    ):
        await add_provider(conn, "acme", sandbox.feed_url("acme"))
        cur = await zombie.execute(sql.query("ingest_fetch_lock"), {"provider": "acme"})
        assert (await cur.fetchone() or {})["locked"]
        admitted = await request_fetch(client, "acme")
        async with running_worker(app, settings):
            for _ in range(200):
                job = await client.get_job(admitted.id)
                if job is not None and job.snoozes >= 2:
                    break
                await asyncio.sleep(0.05)
            assert job is not None and job.state in ("waiting", "running")
            assert sandbox.requests("acme") == 0
            cur = await conn.execute("SELECT count(*) AS n FROM ingest_runs")
            assert (await cur.fetchone() or {})["n"] == 0
            await zombie.execute(sql.query("ingest_fetch_unlock"), {"provider": "acme"})
            done = await wait_for_job(client, admitted.id)
            assert done["state"] == "succeeded" and done["result"]["state"] == "staged"
        assert sandbox.requests("acme") == 1


async def test_a_provider_schedule_fires_the_same_one_fetch_as_manual_triggers(
    settings: Settings,
) -> None:
    from herald.ingest.providers import ProviderSpec, save_provider
    from herald.schedules import Scheduler
    from tests.ingest.harness import NOTE

    app = ingest_app(settings)
    async with await Client.open(app, settings) as client, await open_conn(settings) as conn:
        # A yearly rule: each tick below fires the due time it is given. Every five minutes
        # failed once at a boundary (13:45:00 between "now - 5 s" and now): both ticks then
        # fired that same slot, and the second found it taken.
        spec = ProviderSpec(name="acme", url="http://127.0.0.1:9/", schedule="0 0 1 1 *")
        row, _ = await save_provider(conn, spec, app=app, note=NOTE)
        manual = await request_fetch(client, "acme")
        await conn.execute(
            "UPDATE schedules SET next_due_at = herald_now() - interval '5 seconds' WHERE id = %s",
            (row.schedule_id,),
        )
        scheduler = Scheduler(client)
        fired = await scheduler.tick()
        assert fired.taken == 1 and fired.in_progress == 1  # the manual fetch is active
        cur = await conn.execute("SELECT count(*) AS n FROM jobs WHERE kind = 'ingest.fetch'")
        assert (await cur.fetchone() or {})["n"] == 1
        await conn.execute(
            "UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = %s", (manual.id,)
        )
        await conn.execute(
            "UPDATE schedules SET next_due_at = herald_now() - interval '5 seconds' WHERE id = %s",
            (row.schedule_id,),
        )
        fired = await scheduler.tick()
        assert fired.fired == 1 and fired.in_progress == 0
        cur = await conn.execute(
            "SELECT key, payload FROM jobs WHERE kind = 'ingest.fetch' AND state = 'waiting'"
        )
        assert await cur.fetchall() == [{"key": "acme", "payload": {"provider": "acme"}}]
