"""Staging and processing rules against a real PostgreSQL: fencing, gating, retries,
requeue, convergence of repeated and out-of-order snapshots."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from herald.config import Settings
from herald.db import AsyncConn
from herald.errors import LeaseLost
from herald.ingest.fetch import Batch
from herald.ingest.processing import claim, drain_run, requeue_stuck
from herald.ingest.records import Plan, Zone
from herald.ingest.sandbox import SnapshotSpec, expected_snapshot
from herald.ingest.staging import RunStager, mark_staged, start_run
from tests.ingest.harness import (
    add_provider,
    canonical,
    fake_fetch_job,
    open_conn,
    stage_snapshot,
)

WHEN = dt.datetime(2026, 3, 1, 20, tzinfo=dt.UTC)


def plan(plan_id: str, *, hours: int = 2, online: bool = True, price: str = "10") -> Plan:
    zone = Zone("z1", "Platea", Decimal(price), 100, False)
    return Plan(
        "b1", plan_id, f"title {plan_id}", WHEN, WHEN + dt.timedelta(hours=hours),
        "online" if online else "offline", online, None, None, False,
        Decimal(price), Decimal(price), (zone,),
    )  # fmt: skip


@pytest.fixture
async def conn(settings: Settings) -> AsyncIterator[AsyncConn]:
    async with await open_conn(settings) as connection:
        await add_provider(connection, "acme", "http://127.0.0.1:9/feeds/acme")
        await add_provider(connection, "other", "http://127.0.0.1:9/feeds/other")
        yield connection


async def _count(conn: AsyncConn, query: str, *args: object) -> int:
    cur = await conn.execute(query, args)
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def test_a_fetcher_that_lost_its_lease_can_neither_add_rows_nor_stage_the_run(
    conn: AsyncConn,
) -> None:
    job_id, fence = await fake_fetch_job(conn, "acme")
    run = await start_run(conn, "acme", job_id, fence)
    stager = RunStager(conn, run["id"], "acme", fence)
    await stager(Batch([plan("1"), plan("2")], []))
    # The lease lapses and the job is claimed again: its fence moves on.
    await conn.execute("UPDATE jobs SET fence = fence + 1 WHERE id = %s", (job_id,))
    with pytest.raises(LeaseLost):
        await stager(Batch([plan("3")], []))
    # The next attempt (holding the provider's fetch lock) abandons the orphaned run.
    second = await start_run(conn, "acme", job_id, fence + 1)
    assert await mark_staged(conn, run["id"], fence, bytes_read=0, attempts=1) is None
    states = await conn.execute("SELECT id, state, rows_staged FROM ingest_runs ORDER BY id")
    assert [(r["id"], r["state"], r["rows_staged"]) for r in await states.fetchall()] == [
        (run["id"], "failed", 2),
        (second["id"], "fetching", 0),
    ]
    assert await _count(conn, "SELECT count(*) AS n FROM ingest_staged") == 2
    assert await claim(conn, run["id"], "w", 100) == []  # a failed run's rows never run


async def test_one_fetching_run_per_provider_is_enforced_by_the_database(
    conn: AsyncConn,
) -> None:
    import psycopg

    job_id, fence = await fake_fetch_job(conn, "acme")
    await conn.execute(
        "INSERT INTO ingest_runs (provider, job_id, job_fence, snapshot_at) "
        "VALUES ('acme', %s, %s, now())",
        (job_id, fence),
    )
    with pytest.raises(psycopg.errors.UniqueViolation):
        await conn.execute(
            "INSERT INTO ingest_runs (provider, job_id, job_fence, snapshot_at) "
            "VALUES ('acme', %s, %s, now())",
            (job_id, fence),
        )
    other, other_fence = await fake_fetch_job(conn, "other")
    await start_run(conn, "other", other, other_fence)  # another provider is not held up


async def test_rows_are_claimable_only_once_their_run_is_staged(conn: AsyncConn) -> None:
    job_id, fence = await fake_fetch_job(conn, "acme")
    run = await start_run(conn, "acme", job_id, fence)
    await RunStager(conn, run["id"], "acme", fence)(Batch([plan("1"), plan("2")], []))
    assert await claim(conn, run["id"], "w", 100) == []
    await mark_staged(conn, run["id"], fence, bytes_read=0, attempts=1)
    assert len(await claim(conn, run["id"], "w", 100)) == 2
    assert await claim(conn, run["id"], "w2", 100) == []  # claimed rows are not pending


async def test_a_row_the_database_refuses_is_retried_then_failed_and_stays_visible(
    conn: AsyncConn,
) -> None:
    job_id, fence = await fake_fetch_job(conn, "acme")
    run = await start_run(conn, "acme", job_id, fence)
    bad = plan("bad", hours=-1)  # ends before it starts: the canonical table refuses it
    await RunStager(conn, run["id"], "acme", fence)(Batch([plan("1"), bad, plan("2")], []))
    await mark_staged(conn, run["id"], fence, bytes_read=0, attempts=1)
    stats = await drain_run(conn, run["id"], "w", batch=10, poll=0.01)
    assert stats.done == 2 and stats.failed == 1 and stats.row_failures == 3
    cur = await conn.execute(
        "SELECT plan_id, state, attempts, last_error FROM ingest_staged ORDER BY id"
    )
    rows = await cur.fetchall()
    assert [(r["plan_id"], r["state"], r["attempts"]) for r in rows] == [
        ("1", "done", 1), ("bad", "failed", 3), ("2", "done", 1),
    ]  # fmt: skip
    assert "plan_dates_ordered" in rows[1]["last_error"]
    assert stats.processed_run is not None and stats.processed_run["rows_failed"] == 1
    assert set(await canonical(conn, "acme")) == {("b1", "1"), ("b1", "2")}


async def test_rows_stuck_in_processing_are_requeued_and_finished_by_another_worker(
    conn: AsyncConn,
) -> None:
    job_id, fence = await fake_fetch_job(conn, "acme")
    run = await start_run(conn, "acme", job_id, fence)
    await RunStager(conn, run["id"], "acme", fence)(Batch([plan(str(i)) for i in range(10)], []))
    await mark_staged(conn, run["id"], fence, bytes_read=0, attempts=1)
    crashed = await claim(conn, run["id"], "crashed-worker", 4)  # then never processes them
    assert await requeue_stuck(conn, after=60.0) == []  # not stuck yet
    await conn.execute("SET herald.clock_offset = '2 minutes'")
    requeued = await requeue_stuck(conn, after=60.0)
    assert sorted(r["id"] for r in requeued) == sorted(crashed)
    stats = await drain_run(conn, run["id"], "survivor", batch=3, poll=0.01)
    assert stats.done == 10 and stats.processed_run is not None
    cur = await conn.execute(
        "SELECT attempts, claimed_by, last_error FROM ingest_staged WHERE id = ANY(%s)",
        (crashed,),
    )
    for row in await cur.fetchall():
        assert row["attempts"] == 2 and row["claimed_by"] == "survivor"
        assert row["last_error"].startswith("requeued: in processing since")
    # A slow original worker finishing late changes nothing: the rows are not its own.
    from herald.ingest.processing import DrainStats, process_batch

    late = DrainStats()
    await process_batch(conn, crashed, "crashed-worker", late)
    assert late.done == 0


async def _snapshot_state(
    conn: AsyncConn, provider: str
) -> dict[tuple[str, str], tuple[object, ...]]:
    rows = await canonical(conn, provider)
    return {
        k: (r["title"], r["starts_at"], r["ends_at"], r["sell_mode"], r["ever_online"],
            r["min_price"], r["max_price"], r["zones"])
        for k, r in rows.items()
    }  # fmt: skip


async def test_repeated_and_out_of_order_snapshots_converge(conn: AsyncConn) -> None:
    spec = SnapshotSpec(seed=11, plans=600, plans_per_base=2)
    # acme sees version 1 then version 4, processed in order; other gets the same two
    # snapshots but the older one completes processing after the newer one.
    acme_old = await stage_snapshot(conn, "acme", spec, 1)
    acme_new = await stage_snapshot(conn, "acme", spec, 4)
    other_old = await stage_snapshot(conn, "other", spec, 1)
    other_new = await stage_snapshot(conn, "other", spec, 4)
    for run_id in (acme_old, acme_new, other_new, other_old):
        await drain_run(conn, run_id, "w", batch=250, poll=0.01)
    acme, other = await _snapshot_state(conn, "acme"), await _snapshot_state(conn, "other")
    assert acme == other
    newest, oldest = expected_snapshot(spec, 4), expected_snapshot(spec, 1)
    for identity, expected in newest.items():
        assert acme[identity][0] == expected.title  # the newer snapshot's values won
    went_offline = [
        i for i, p in oldest.items() if p.online and i in newest and not newest[i].online
    ]
    assert went_offline, "the seed should take some plans offline between versions"
    assert all(acme[i][4] is True for i in went_offline)  # ever_online never goes back
    gone = set(oldest) - set(newest)
    assert gone and gone <= set(acme)  # a plan missing from a snapshot is kept as last seen
    # Processing the same rows again (a retry) changes nothing at all.
    await conn.execute(
        "UPDATE ingest_staged SET state = 'pending', attempts = 0 WHERE run_id = %s", (acme_new,)
    )
    await conn.execute(
        "UPDATE ingest_runs SET state = 'staged', finished_at = NULL WHERE id = %s", (acme_new,)
    )
    again = await drain_run(conn, acme_new, "w", batch=250, poll=0.01)
    assert again.done == len(newest) and again.changed == 0
    assert await _snapshot_state(conn, "acme") == acme
    # The same snapshot fetched again: only last_seen_at moves on.
    before = await canonical(conn, "acme")
    repeat = await stage_snapshot(conn, "acme", spec, 4)
    await drain_run(conn, repeat, "w", batch=250, poll=0.01)
    assert await _snapshot_state(conn, "acme") == acme
    after = await canonical(conn, "acme")
    assert all(after[i]["last_seen_at"] > before[i]["last_seen_at"] for i in newest)
    assert all(after[i]["first_seen_at"] == before[i]["first_seen_at"] for i in after)


async def test_the_housekeeping_pass_readmits_unattended_runs_and_prunes_what_expired(
    conn: AsyncConn, settings: Settings
) -> None:
    from herald.ingest.jobs import housekeeping_pass, ingest_runtime
    from tests.ingest.harness import ingest_app

    runtime = ingest_runtime(ingest_app(settings))
    spec = SnapshotSpec(seed=4, plans=50, malformed_every=10)
    run_id = await stage_snapshot(conn, "acme", spec, 1)
    first = await housekeeping_pass(runtime)
    assert first["readmitted"] == 1
    cur = await conn.execute("SELECT kind, key, payload FROM jobs WHERE kind = 'ingest.process'")
    assert await cur.fetchall() == [
        {"kind": "ingest.process", "key": f"run:{run_id}:0", "payload": {"run_id": run_id}}
    ]
    assert (await housekeeping_pass(runtime))["readmitted"] == 0  # one is waiting already
    await drain_run(conn, run_id, "w", poll=0.01)
    # Fifteen days later (the pass runs on its own connection: age the rows instead).
    await conn.execute("UPDATE ingest_runs SET finished_at = finished_at - interval '15 days'")
    await conn.execute(
        "UPDATE ingest_quarantine SET created_at = created_at - interval '15 days', "
        "expires_at = expires_at - interval '15 days'"
    )
    pruned = await housekeeping_pass(runtime)
    assert pruned["pruned_rows"] == 45 and pruned["pruned_quarantine"] == 5
    cur = await conn.execute("SELECT state, rows_done FROM ingest_runs WHERE id = %s", (run_id,))
    assert await cur.fetchone() == {"state": "processed", "rows_done": 45}  # the run stays


async def test_the_worker_that_closes_a_large_run_refreshes_the_plans_statistics(
    conn: AsyncConn,
) -> None:
    async def known_plans() -> float:
        cur = await conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'ingest_plans'::regclass"
        )
        row = await cur.fetchone()
        assert row is not None
        return float(row["reltuples"])

    spec = SnapshotSpec(seed=5, plans=400, plans_per_base=2)
    assert await known_plans() < 0  # never analyzed: the planner knows nothing of it yet
    small = await stage_snapshot(conn, "acme", spec, 1)
    stats = await drain_run(conn, small, "w", batch=250, poll=0.01, analyze_from=10_000)
    assert stats.processed_run is not None and not stats.analyzed  # below the floor
    large = await stage_snapshot(conn, "other", spec, 1)
    stats = await drain_run(conn, large, "w", batch=250, poll=0.01, analyze_from=100)
    assert stats.analyzed
    assert await known_plans() == await _count(conn, "SELECT count(*) AS n FROM ingest_plans")
    # A run that is a small share of what the statistics describe leaves them alone.
    again = await stage_snapshot(conn, "acme", SnapshotSpec(seed=5, plans=20), 2)
    stats = await drain_run(conn, again, "w", batch=250, poll=0.01, analyze_from=10)
    assert stats.processed_run is not None and not stats.analyzed


async def test_staged_rows_keep_every_value_as_the_mapping_gave_it(conn: AsyncConn) -> None:
    # Binary COPY through the session's buffer: what the server stores is what the
    # mapping gave, decimal scale, zone JSON and instants in any offset included.
    madrid = dt.timezone(dt.timedelta(hours=2))
    early = dt.datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC)
    zones = (
        Zone('z "1"', "Tribuna\\Norte ñ 🎟", Decimal("20.0"), 7, True),
        Zone("z2", "Palco\n", Decimal("20.00"), 0, False),
        Zone("z3", "", Decimal("1E+2"), 999_999_999_999, False),
    )
    plans = [
        Plan("b1", "p1", "Ópera \"x\"\ttab", early, WHEN.astimezone(madrid), "online", True,
             None, None, False, Decimal("20.0"), Decimal("1E+2"), zones),
        Plan("b1", "p2", "t", WHEN, WHEN, "offline", False, None, None, True, None, None, ()),
        Plan("b2", "p1", "t2", WHEN.astimezone(madrid), WHEN, "online", True, None, None,
             False, Decimal("0.005"), Decimal("123456789012.5"), zones[:1]),
    ]  # fmt: skip
    job_id, fence = await fake_fetch_job(conn, "acme")
    run = await start_run(conn, "acme", job_id, fence)
    stager = RunStager(conn, run["id"], "acme", fence)
    await stager(Batch(plans[:2], []))
    await stager(Batch(plans[2:], []))  # a second batch reuses the encoder's caches
    cur = await conn.execute(
        "SELECT run_id, max_attempts, base_plan_id, plan_id, title, starts_at, ends_at, "
        "sell_mode, online, min_price::text AS min_price, max_price::text AS max_price, "
        "zones FROM ingest_staged ORDER BY id"
    )
    rows = await cur.fetchall()
    assert [
        (r["run_id"], r["max_attempts"], r["base_plan_id"], r["plan_id"], r["title"],
         r["starts_at"], r["ends_at"], r["sell_mode"], r["online"], r["min_price"],
         r["max_price"])
        for r in rows
    ] == [
        (run["id"], 3, "b1", "p1", "Ópera \"x\"\ttab", early, WHEN, "online", True, "20.0",
         "100"),
        (run["id"], 3, "b1", "p2", "t", WHEN, WHEN, "offline", False, None, None),
        (run["id"], 3, "b2", "p1", "t2", WHEN, WHEN, "online", True, "0.005",
         "123456789012.5"),
    ]  # fmt: skip
    assert rows[0]["zones"] == [
        {"zone_id": 'z "1"', "name": "Tribuna\\Norte ñ 🎟", "price": 20.0, "capacity": 7,
         "numbered": True},
        {"zone_id": "z2", "name": "Palco\n", "price": 20.0, "capacity": 0, "numbered": False},
        {"zone_id": "z3", "name": "", "price": 100, "capacity": 999_999_999_999,
         "numbered": False},
    ]  # fmt: skip
    assert rows[1]["zones"] == [] and rows[2]["zones"] == rows[0]["zones"][:1]
    cur = await conn.execute("SELECT zones::text AS z FROM ingest_staged ORDER BY id LIMIT 1")
    text = (await cur.fetchone() or {})["z"]
    assert '"price": 20.0,' in text and '"price": 20.00,' in text and '"price": 100,' in text
