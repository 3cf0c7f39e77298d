"""Manual actions: replay, discard, cancel, retry-now - each audited with before/after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from herald import Client, Settings
from herald.db import AsyncConn, connect, conninfo
from herald.ops import audit, cleanup, deadletters, jobs
from herald.ops.errors import ActiveJobExists, AuditInfoMissing, Conflict, NotFound
from tests.eventually import eventually
from tests.support import APP, running_worker, wait_for_job

ACTOR = "alice@ops"
REASON = "downstream fixed, see ticket 42"


async def _db(settings: Settings) -> AsyncConn:
    assert settings.database_url is not None
    return await connect(conninfo(settings.database_url, settings.schema))


async def _audit_rows(conn: AsyncConn) -> list[audit.AuditEntry]:
    return await audit.entries(conn, limit=1000)


async def _dead_jobs(settings: Settings, client: Client, specs: list[dict[str, Any]]) -> list[int]:
    ids = [(await client.enqueue(s["kind"], s.get("payload"), key=s.get("key"))).id for s in specs]
    async with running_worker(settings, concurrency=4):
        for job_id in ids:
            assert (await wait_for_job(client, job_id))["state"] == "dead"
    return ids


async def test_actor_and_reason_are_required_and_nothing_is_written(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("noop", run_at=_later())
    async with await _db(settings) as conn:
        for actor, reason in [
            ("", "why"),
            ("  ", "why"),
            ("bob", ""),
            (None, "why"),
            ("bob", None),
        ]:
            with pytest.raises(AuditInfoMissing, match="needs"):
                await jobs.cancel(conn, job.id, actor=actor, reason=reason)  # type: ignore[arg-type]
            with pytest.raises(AuditInfoMissing):
                await audit.record(conn, actor, "cancel", ("job", job.id), reason)  # type: ignore[arg-type]
        waiting = await client.get_job(job.id)
        assert waiting is not None and waiting.state == "waiting"
        assert await _audit_rows(conn) == []
        # The database refuses an empty actor or reason on its own, too.
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(
                "INSERT INTO audit_log (actor, action, target_type, target_id, reason) "
                "VALUES (' ', 'cancel', 'job', '1', 'why')"
            )


def _later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


async def test_retry_now_and_cancel_of_waiting_jobs_are_audited(
    settings: Settings, client: Client
) -> None:
    first = await client.enqueue("noop", run_at=_later())
    second = await client.enqueue("noop", run_at=_later())
    async with await _db(settings) as conn:
        moved = await jobs.retry_now(
            conn, first.id, channel=settings.channel, actor=ACTOR, reason=REASON
        )
        assert moved.state == "waiting"
        cancelled = await jobs.cancel(conn, second.id, actor=ACTOR, reason=REASON)
        assert cancelled.state == "cancelled" and cancelled.finished_at is not None
        # A finished job can be neither retried now nor cancelled; nothing is written.
        with pytest.raises(Conflict, match="only a waiting job"):
            await jobs.retry_now(conn, second.id, actor=ACTOR, reason=REASON)
        with pytest.raises(Conflict, match="cancelled"):
            await jobs.cancel(conn, second.id, actor=ACTOR, reason=REASON)
        with pytest.raises(NotFound):
            await jobs.cancel(conn, 10**12, actor=ACTOR, reason=REASON)
        rows = await _audit_rows(conn)
    assert [(r.action, r.target_id) for r in rows] == [
        ("cancel", str(second.id)),
        ("retry_now", str(first.id)),
    ]
    cancel_row, retry_row = rows
    assert retry_row.actor == ACTOR and retry_row.reason == REASON
    assert retry_row.target_type == "job"
    assert retry_row.before["run_at"] > retry_row.after["run_at"]
    assert retry_row.after["run_at"] <= retry_row.at.isoformat()
    assert cancel_row.before["state"] == "waiting"
    assert cancel_row.after["state"] == "cancelled"
    job = await client.get_job(second.id)
    assert job is not None and job.errors[-1]["kind"] == "cancelled"
    assert REASON in job.errors[-1]["message"]


async def test_cancelling_a_running_job_makes_its_workers_writes_stale(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("sleepy", {"sleep": 0.5})
    async with running_worker(settings, concurrency=1), await _db(settings) as conn:
        await wait_for_job(client, job.id, lambda r: r["state"] == "running")
        cancelled = await jobs.cancel(conn, job.id, actor=ACTOR, reason=REASON)
        assert cancelled.state == "cancelled"
        assert cancelled.lease_owner is None

        async def refused() -> int:  # its finish (or heartbeat) is refused
            return await client.stale_writes(job.id)

        await eventually(refused, what="the cancelled attempt's write to be refused")
        (row,) = await _audit_rows(conn)
    final = await client.get_job(job.id)
    assert final is not None and final.state == "cancelled" and final.result is None
    assert row.before["state"] == "running" and row.before["lease_owner"] is not None
    assert row.after["fence"] == row.before["fence"] + 1


async def test_dead_letters_list_filter_and_show(settings: Settings, client: Client) -> None:
    permanent, failed = await _dead_jobs(
        settings,
        client,
        [{"kind": "permanent", "key": "obj-1"}, {"kind": "fail", "payload": {"x": 1}}],
    )
    async with await _db(settings) as conn:
        everything = await deadletters.list_dead(conn)
        assert [d.job_id for d in everything] == [failed, permanent]
        assert all(d.cleanup_state == "pending" for d in everything)
        by_kind = await deadletters.list_dead(conn, kind="fail")
        assert [d.job_id for d in by_kind] == [failed]
        by_key = await deadletters.list_dead(conn, key="obj-1")
        assert [d.job_id for d in by_key] == [permanent]
        by_error = await deadletters.list_dead(conn, error="FAILURE ON ATTEMPT 2")
        assert [d.job_id for d in by_error] == [failed]
        assert await deadletters.list_dead(conn, error="no such text") == []
        assert await deadletters.list_dead(conn, queue="elsewhere") == []
        page = await deadletters.list_dead(conn, before_id=everything[0].id)
        assert [d.job_id for d in page] == [permanent]
        shown = await deadletters.get(conn, by_kind[0].id)
        assert shown.payload == {"x": 1} and shown.reason == "exhausted"
        assert shown.job_state == "dead" and len(shown.errors) == 3
        with pytest.raises(NotFound):
            await deadletters.get(conn, 10**12)
        with pytest.raises(ValueError):
            await deadletters.list_dead(conn, cleanup_state="bogus")


async def test_replay_creates_a_linked_job_with_a_fresh_budget(
    settings: Settings, client: Client
) -> None:
    (original,) = await _dead_jobs(settings, client, [{"kind": "fail", "key": "obj-9"}])
    async with await _db(settings) as conn:
        (dead,) = await deadletters.list_dead(conn)
        # An active job of the same object: the replay says so and writes nothing.
        blocker = await client.enqueue("fail", key="obj-9", run_at=_later())
        with pytest.raises(ActiveJobExists) as active:
            await deadletters.replay(client, dead.id, actor=ACTOR, reason=REASON)
        assert active.value.job_id == blocker.id
        assert await _audit_rows(conn) == []
        await jobs.cancel(conn, blocker.id, actor="bob", reason="clear the way for the replay")

        replayed = await deadletters.replay(client, dead.id, actor=ACTOR, reason=REASON)
        job = await client.get_job(replayed.job_id)
        assert job is not None
        assert job.replay_of == original and job.attempt == 0 and job.max_attempts == 3
        assert job.state == "waiting" and job.key == "obj-9"
        assert job.version == 3  # after the original (1) and the cancelled blocker (2)
        assert (await deadletters.get(conn, dead.id)).replayed_job_id == replayed.job_id
        row = (await audit.entries(conn, action="replay"))[0]
    assert row.target_type == "dead_letter" and row.target_id == str(dead.id)
    assert row.before["replayed_job_id"] is None
    assert row.after["replayed_job_id"] == replayed.job_id
    with pytest.raises(AuditInfoMissing):
        await deadletters.replay(client, dead.id, actor="alice", reason=" ")


async def test_discard_keeps_the_record_in_the_audit_log(
    settings: Settings, client: Client
) -> None:
    first, second = await _dead_jobs(settings, client, [{"kind": "permanent"}] * 2)
    async with await _db(settings) as conn:
        pending, _ = sorted(await deadletters.list_dead(conn), key=lambda d: d.job_id)
        # Its cleanup is still pending: discarding would drop it, so only with force.
        with pytest.raises(Conflict, match="pending cleanup"):
            await deadletters.discard(conn, pending.id, actor=ACTOR, reason=REASON)
        removed = await deadletters.discard(
            conn, pending.id, force=True, actor=ACTOR, reason=REASON
        )
        assert removed.job_id == first
        with pytest.raises(NotFound):
            await deadletters.discard(conn, pending.id, actor=ACTOR, reason=REASON)
        # Once its cleanup is settled (no hook for this kind) a plain discard does.
        await cleanup.CleanupRunner(APP, conn).run_once()
        (settled,) = await deadletters.list_dead(conn)
        assert settled.cleanup_state == "not_needed"
        await deadletters.discard(conn, settled.id, actor=ACTOR, reason=REASON)
        assert await deadletters.list_dead(conn) == []
        (forced,) = await audit.entries(conn, target_type="dead_letter", target_id=pending.id)
        (plain,) = await audit.entries(conn, target_type="dead_letter", target_id=settled.id)
    assert forced.action == "discard" and forced.actor == ACTOR
    assert forced.before["job_id"] == first and forced.before["payload"] == {}
    assert forced.before["errors"][0]["message"] == "this request can never succeed"
    assert forced.after == {"cleanup_abandoned": True}
    assert plain.before["job_id"] == second and plain.after is None
