"""Admission: one active job per object, versions, idempotency, transactions, bulk, bad input."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from herald import (
    AdmissionError,
    Client,
    IdempotencyConflict,
    InvalidPayload,
    JobSpec,
    Outcome,
    PayloadTooLarge,
    Settings,
    UnknownKind,
)
from herald.client import open_connection
from tests.support import APP, running_worker


async def _scalar(client: Client, query: str, *params: Any) -> Any:
    async with client.pool.connection() as conn:
        cur = await conn.execute(query.encode(), params or None)
        row = await cur.fetchone()
    assert row is not None
    return next(iter(row.values()))


async def _finish_all(client: Client, key: str) -> None:
    """Mark the object's active job finished, as a worker would have."""
    async with client.pool.connection() as conn:
        await conn.execute(
            "UPDATE jobs SET state = 'succeeded', finished_at = herald_now() "
            "WHERE key = %s AND state IN ('waiting', 'running')",
            (key,),
        )


# --- one active job per object -------------------------------------------------------


async def test_unique_active_race_32_enqueuers_50_keys(settings: Settings) -> None:
    keys = [f"object-{n}" for n in range(50)]
    clients = [await Client.open(APP, settings.with_(pool_size=1)) for _ in range(32)]
    try:

        async def enqueuer(client: Client, seed: int) -> list[tuple[str, Any]]:
            order = keys[:]
            random.Random(seed).shuffle(order)
            got = []
            for key in order:
                got.append((key, await client.enqueue("noop", {"key": key}, key=key)))
            return got

        results = await asyncio.gather(
            *(enqueuer(c, seed) for seed, c in enumerate(clients)), return_exceptions=True
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    leaked = [r for r in results if isinstance(r, BaseException)]
    assert leaked == []
    calls = [pair for r in results if isinstance(r, list) for pair in r]
    assert len(calls) == 32 * 50
    assert {e.outcome for _, e in calls} <= {Outcome.CREATED, Outcome.IN_PROGRESS}
    created = {key: e.id for key, e in calls if e.outcome is Outcome.CREATED}
    assert sorted(created) == sorted(keys)  # exactly one creator per object
    # Every other caller was pointed at that very job.
    assert all(e.id == created[key] and e.version == 1 for key, e in calls)

    async with await open_connection(settings) as conn:
        cur = await conn.execute(
            "SELECT count(*) AS jobs, count(DISTINCT key) AS keys, "
            "count(*) FILTER (WHERE state = 'waiting') AS waiting FROM jobs"
        )
        row = await cur.fetchone()
    assert row == {"jobs": 50, "keys": 50, "waiting": 50}


async def test_versions_increase_and_finished_versions_do_not_block(client: Client) -> None:
    first = await client.enqueue("noop", key="article-7")
    assert (first.version, first.outcome) == (1, Outcome.CREATED)
    again = await client.enqueue("noop", key="article-7")
    assert (again.id, again.version, again.outcome) == (first.id, 1, Outcome.IN_PROGRESS)

    await _finish_all(client, "article-7")
    second = await client.enqueue("noop", key="article-7")
    assert (second.version, second.outcome) == (2, Outcome.CREATED)
    await _finish_all(client, "article-7")
    third = await client.enqueue("noop", key="article-7")
    assert (third.version, third.outcome) == (3, Outcome.CREATED)
    assert len({first.id, second.id, third.id}) == 3

    # Another kind acting on the same object has its own versions.
    other = await client.enqueue("echo", key="article-7")
    assert (other.version, other.outcome) == (1, Outcome.CREATED)

    # Versions are never reused, even after the finished rows are gone (pruned).
    await _finish_all(client, "article-7")
    async with client.pool.connection() as conn:
        await conn.execute("DELETE FROM jobs WHERE key = 'article-7' AND kind = 'noop'")
    fourth = await client.enqueue("noop", key="article-7")
    assert fourth.version == 4
    rows = await client.list_jobs(key="article-7", kind="noop")
    assert [(r.version, r.state) for r in rows] == [(4, "waiting")]


async def test_admission_races_a_worker_finishing_the_objects_jobs(settings: Settings) -> None:
    """While a worker keeps finishing the object's jobs, concurrent admissions never fail,
    never see two active jobs and never skip or repeat a version number."""
    clients = [await Client.open(APP, settings.with_(pool_size=1)) for _ in range(6)]
    try:
        async with running_worker(settings, concurrency=4):

            async def enqueuer(client: Client) -> list[Any]:
                got = []
                for _ in range(25):
                    got.append(await client.enqueue("noop", key="hot"))
                    await asyncio.sleep(0.01)  # spread the calls over many worker cycles
                return got

            results = await asyncio.gather(*(enqueuer(c) for c in clients))
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    calls = [e for r in results for e in r]
    assert {e.outcome for e in calls} <= {Outcome.CREATED, Outcome.IN_PROGRESS}
    created = sorted(e.version for e in calls if e.outcome is Outcome.CREATED)
    assert created == list(range(1, len(created) + 1))
    async with await open_connection(settings) as conn:
        cur = await conn.execute(
            "SELECT array_agg(version ORDER BY version) AS versions, "
            "count(*) FILTER (WHERE state IN ('waiting', 'running')) AS active FROM jobs"
        )
        row = await cur.fetchone()
    assert row is not None
    assert row["versions"] == created and row["active"] <= 1


# --- idempotency ---------------------------------------------------------------------


async def test_idempotency_key_replays_the_original_job(client: Client) -> None:
    payload = {"article": 1, "lang": "en"}
    original = await client.enqueue("echo", payload, idempotency_key="req-1")
    assert original.outcome is Outcome.CREATED
    replay = await client.enqueue("echo", payload, idempotency_key="req-1")
    assert (replay.id, replay.version, replay.outcome) == (
        original.id,
        original.version,
        Outcome.REPLAY,
    )
    # The same JSON object written in another key order is the same request.
    reordered = await client.enqueue("echo", {"lang": "en", "article": 1}, idempotency_key="req-1")
    assert (reordered.id, reordered.outcome) == (original.id, Outcome.REPLAY)
    # It replays even after the job finished.
    await _scalar(client, "UPDATE jobs SET state = 'succeeded', finished_at = now() RETURNING id")
    late = await client.enqueue("echo", payload, idempotency_key="req-1")
    assert (late.id, late.outcome) == (original.id, Outcome.REPLAY)
    assert await _scalar(client, "SELECT count(*) FROM jobs") == 1


async def test_idempotency_key_with_another_request_is_a_conflict(client: Client) -> None:
    original = await client.enqueue("echo", {"article": 1}, idempotency_key="req-2")
    with pytest.raises(IdempotencyConflict) as caught:
        await client.enqueue("echo", {"article": 2}, idempotency_key="req-2")
    assert caught.value.job_id == original.id
    with pytest.raises(IdempotencyConflict):
        await client.enqueue("noop", {"article": 1}, idempotency_key="req-2")
    with pytest.raises(IdempotencyConflict):
        await client.enqueue("echo", {"article": 1}, key="other", idempotency_key="req-2")
    assert await _scalar(client, "SELECT count(*) FROM jobs") == 1
    assert await _scalar(client, "SELECT job_id FROM idempotency_keys") == original.id


async def test_idempotency_key_expires_after_its_retention(
    settings: Settings, client: Client
) -> None:
    original = await client.enqueue("echo", {"n": 1}, idempotency_key="req-3")
    later = await open_connection(settings)
    async with later:
        # This connection's database clock runs 25 h ahead: past the 24 h retention.
        await later.execute("SET herald.clock_offset = '25 hours'")
        fresh = await client.enqueue("echo", {"n": 2}, idempotency_key="req-3", conn=later)
    assert fresh.outcome is Outcome.CREATED and fresh.id != original.id
    assert await _scalar(client, "SELECT job_id FROM idempotency_keys") == fresh.id
    # From then on the key means the new request.
    replay = await client.enqueue("echo", {"n": 2}, idempotency_key="req-3")
    assert (replay.id, replay.outcome) == (fresh.id, Outcome.REPLAY)

    # The retention is a setting.
    async with await Client.open(APP, settings.with_(idempotency_retention=60.0)) as short:
        first = await short.enqueue("echo", {}, idempotency_key="req-4")
        expires = await _scalar(
            short,
            "SELECT extract(epoch FROM expires_at - created_at) FROM idempotency_keys "
            "WHERE key = 'req-4'",
        )
        assert float(expires) == pytest.approx(60.0)
        again = await short.enqueue("echo", {}, idempotency_key="req-4")
        assert again.id == first.id


async def test_concurrent_idempotent_admissions_create_one_job(settings: Settings) -> None:
    clients = [await Client.open(APP, settings.with_(pool_size=1)) for _ in range(8)]
    try:
        results = await asyncio.gather(
            *(c.enqueue("echo", {"x": 1}, idempotency_key="same") for c in clients)
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    assert len({r.id for r in results}) == 1
    assert sorted(r.outcome for r in results) == sorted([Outcome.CREATED] + [Outcome.REPLAY] * 7)


# --- transactional enqueue -----------------------------------------------------------


async def test_transactional_enqueue_commits_and_rolls_back_with_the_caller(
    settings: Settings, client: Client
) -> None:
    conn = await open_connection(settings)
    async with conn:
        await conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        async with conn.transaction(force_rollback=True):
            await conn.execute("INSERT INTO orders VALUES (1)")
            await client.enqueue("noop", {"order": 1}, key="order-1", conn=conn)
            await client.enqueue("noop", {"order": 1}, idempotency_key="o-1", conn=conn)
            await client.enqueue_many([JobSpec("noop", {"order": 1})], conn=conn)
        assert await _scalar(client, "SELECT count(*) FROM jobs") == 0
        assert await _scalar(client, "SELECT count(*) FROM idempotency_keys") == 0
        assert await _scalar(client, "SELECT count(*) FROM key_versions") == 0

        async with conn.transaction():
            await conn.execute("INSERT INTO orders VALUES (2)")
            job = await client.enqueue("noop", {"order": 2}, key="order-2", conn=conn)
            # Not visible to anyone else before the caller commits.
            assert await _scalar(client, "SELECT count(*) FROM jobs") == 0
        assert await _scalar(client, "SELECT count(*) FROM orders") == 1
        row = await client.get_job(job.id)
        assert row is not None and row.payload == {"order": 2}
        # The rolled-back attempt did not burn a version number.
        assert row.version == 1


async def test_transactional_enqueue_on_a_plain_psycopg_connection(
    settings: Settings, client: Client
) -> None:
    """A caller's own non-autocommit connection with tuple rows works the same way."""
    assert settings.database_url is not None
    from herald.db import conninfo

    info = conninfo(settings.database_url, settings.schema)
    async with await psycopg.AsyncConnection.connect(info) as conn:
        await client.enqueue("noop", {"n": 1}, conn=conn)
        await conn.rollback()
        assert await _scalar(client, "SELECT count(*) FROM jobs") == 0
        done = await client.enqueue("noop", {"n": 2}, conn=conn)
        await conn.commit()
    assert await _scalar(client, "SELECT array_agg(id) FROM jobs") == [done.id]


async def test_a_plain_connection_keeps_the_callers_transaction_for_every_path(
    settings: Settings, client: Client
) -> None:
    """Idempotent and bulk admissions on a fresh non-autocommit connection must not
    commit on their own: the caller's rollback takes them back too."""
    assert settings.database_url is not None
    from herald.db import conninfo

    info = conninfo(settings.database_url, settings.schema)
    async with await psycopg.AsyncConnection.connect(info) as conn:
        await client.enqueue("noop", {"n": 1}, idempotency_key="tx-1", conn=conn)
        await conn.rollback()
        await client.enqueue_many([JobSpec("noop", {"n": 2})], conn=conn)
        await conn.rollback()
        assert await _scalar(client, "SELECT count(*) FROM jobs") == 0
        assert await _scalar(client, "SELECT count(*) FROM idempotency_keys") == 0
        kept = await client.enqueue("noop", {"n": 3}, idempotency_key="tx-3", conn=conn)
        await conn.commit()
    assert await _scalar(client, "SELECT array_agg(id) FROM jobs") == [kept.id]


# --- bulk ----------------------------------------------------------------------------


async def test_bulk_enqueue_returns_results_in_input_order(client: Client) -> None:
    busy = await client.enqueue("noop", {"i": -1}, key="busy")
    specs = [
        JobSpec("noop", {"i": 0}, key="a"),
        JobSpec("echo", {"i": 1}),
        JobSpec("noop", {"i": 2}, key="a"),  # duplicate of 0 in the same batch
        JobSpec("noop", {"i": 3}, key="b"),
        JobSpec("echo", {"i": 4}, idempotency_key="bulk-x"),
        JobSpec("noop", {"i": 5}, key="busy"),  # an active job already exists
        JobSpec("echo", {"i": 4}, idempotency_key="bulk-x"),  # replay within the batch
        JobSpec("echo", {"i": 7}, priority=5, queue="other"),
    ]
    results = await client.enqueue_many(specs)
    assert [r.outcome for r in results] == [
        Outcome.CREATED,
        Outcome.CREATED,
        Outcome.IN_PROGRESS,
        Outcome.CREATED,
        Outcome.CREATED,
        Outcome.IN_PROGRESS,
        Outcome.REPLAY,
        Outcome.CREATED,
    ]
    assert results[2].id == results[0].id
    assert results[5].id == busy.id
    assert results[6].id == results[4].id
    for index, result in enumerate(results):
        if result.outcome is Outcome.CREATED:
            row = await client.get_job(result.id)
            assert row is not None and row.payload == {"i": index}
    seven = await client.get_job(results[7].id)
    assert seven is not None and (seven.priority, seven.queue) == (5, "other")
    assert await _scalar(client, "SELECT count(*) FROM jobs") == 6
    assert await client.enqueue_many([]) == []

    # A large batch of plain jobs keeps its order too.
    many = await client.enqueue_many([JobSpec("noop", {"n": n}) for n in range(2000)])
    assert [r.outcome for r in many] == [Outcome.CREATED] * 2000
    async with client.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, (payload->>'n')::int AS n FROM jobs WHERE payload ? 'n'"
        )
        by_id = {r["id"]: r["n"] for r in await cur.fetchall()}
    assert [by_id[r.id] for r in many] == list(range(2000))


# --- bad input -----------------------------------------------------------------------


class _Opaque:
    pass


BAD: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("unknown kind", {"kind": "no_such_kind"}, UnknownKind, "unknown job kind"),
    ("list payload", {"payload": [1, 2]}, InvalidPayload, "JSON object"),
    ("string payload", {"payload": "x"}, InvalidPayload, "JSON object"),
    ("object in payload", {"payload": {"x": _Opaque()}}, InvalidPayload, "serialisable"),
    ("NaN in payload", {"payload": {"x": float("nan")}}, InvalidPayload, "serialisable"),
    ("too large", {"payload": {"x": "y" * 1_000_001}}, PayloadTooLarge, "over the limit"),
    ("NUL in payload", {"payload": {"x": "a\x00b"}}, InvalidPayload, "NUL"),
    ("NUL in a payload key", {"payload": {"a\x00": 1}}, InvalidPayload, "NUL"),
    ("NUL in key", {"key": "a\x00b"}, AdmissionError, "NUL"),
    ("NUL in idempotency key", {"idempotency_key": "a\x00"}, AdmissionError, "NUL"),
    ("empty key", {"key": ""}, AdmissionError, "key must be"),
    ("naive run_at", {"run_at": datetime(2030, 1, 1)}, AdmissionError, "timezone-aware"),
    ("run_at as text", {"run_at": "2030-01-01"}, AdmissionError, "timezone-aware"),
    ("priority too high", {"priority": 40_000}, AdmissionError, "priority"),
    ("priority as text", {"priority": "high"}, AdmissionError, "priority"),
    ("priority as bool", {"priority": True}, AdmissionError, "priority"),
    ("zero attempts", {"max_attempts": 0}, AdmissionError, "max_attempts"),
    ("queue too long", {"queue": "q" * 201}, AdmissionError, "queue"),
]


async def test_bad_input_is_refused_and_writes_nothing(client: Client) -> None:
    # One schema for all cases: each case must leave the tables exactly as empty.
    for case, changes, error, message in BAD:
        args: dict[str, Any] = {"kind": "noop", "payload": {"ok": True}, **changes}
        kind = args.pop("kind")
        payload = args.pop("payload")
        with pytest.raises(error, match=message):
            await client.enqueue(kind, payload, **args)
        spec = JobSpec(kind, payload, **args)
        with pytest.raises(error, match=message):
            # One bad job spoils the whole batch: nothing of it is written.
            await client.enqueue_many([JobSpec("noop", {"fine": 1}, key="k"), spec])
        counts = await _scalar(
            client,
            "SELECT array[(SELECT count(*) FROM jobs), (SELECT count(*) FROM idempotency_keys),"
            " (SELECT count(*) FROM key_versions)]",
        )
        assert counts == [0, 0, 0], case


async def test_payload_limit_is_configurable_and_text_that_looks_like_nul_is_fine(
    settings: Settings,
) -> None:
    async with await Client.open(APP, settings.with_(payload_limit=100)) as client:
        with pytest.raises(PayloadTooLarge) as caught:
            await client.enqueue("noop", {"x": "y" * 100})
        assert caught.value.limit == 100
        # A literal backslash followed by "u0000" is ordinary text, not a NUL character.
        job = await client.enqueue("noop", {"path": "C:\\u0000dir"})
        row = await client.get_job(job.id)
        assert row is not None and row.payload == {"path": "C:\\u0000dir"}
        assert await _scalar(client, "SELECT count(*) FROM jobs") == 1


async def test_future_run_at_and_defaults_are_stored(client: Client) -> None:
    at = datetime.now(UTC) + timedelta(hours=2)
    job = await client.enqueue("noop", run_at=at, priority=-3, max_attempts=7)
    row = await client.get_job(job.id)
    assert row is not None
    assert (row.run_at, row.priority, row.max_attempts) == (at, -3, 7)
    default = await client.get_job((await client.enqueue("echo")).id)
    assert default is not None
    assert (default.state, default.attempt, default.max_attempts) == ("waiting", 0, 3)
    assert (default.payload, default.queue, default.fence) == ({}, "default", 0)


async def test_unencodable_text_and_out_of_range_run_at_are_refused(client: Client) -> None:
    from datetime import UTC, datetime

    with pytest.raises(InvalidPayload, match="surrogate"):
        await client.enqueue("noop", {"text": "\ud800"})
    with pytest.raises(AdmissionError, match="surrogate"):
        await client.enqueue("noop", {}, key="bad\udfff")
    with pytest.raises(AdmissionError, match="1970 and 9999"):
        await client.enqueue("noop", {}, run_at=datetime(1, 1, 2, tzinfo=UTC))
    assert await client.list_jobs() == []
