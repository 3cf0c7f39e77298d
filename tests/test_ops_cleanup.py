"""The failure log's cleanup: compensation hooks retried with capped backoff until done."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from herald import Backoff, Client, Herald, JobContext, JobSpec, Permanent, Settings
from herald.db import AsyncConn, Row, connect, conninfo
from herald.ops import cleanup
from herald.rows import Job
from tests.eventually import eventually
from tests.test_ops_limits import workers

FAST = Backoff(base=0.01, factor=1.0, cap=0.01, jitter=0.0)


def _publishing_app(calls: list[dict[str, Any]], failures: int) -> Herald:
    """A two-step pipeline whose second step fails for good when the payload says so;
    its compensation hook fails ``failures`` times before it succeeds."""
    app = Herald()
    publish = app.pipeline("publish", steps=["generate", "persist"], max_attempts=1, backoff=FAST)

    @publish.step("generate")
    async def generate(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return {"files": [f"export-{payload['n']}.csv"]}

    @publish.step("persist")
    async def persist(ctx: JobContext, payload: dict[str, Any]) -> None:
        if payload.get("fail"):
            raise Permanent("the catalog refused the record")

    @publish.compensate
    def delete_files(dead: dict[str, Any]) -> None:
        calls.append(dead)
        if len(calls) <= failures:
            raise ConnectionError(f"data service unreachable (call {len(calls)})")

    @app.task("plain", max_attempts=1)
    async def plain(ctx: JobContext, payload: dict[str, Any]) -> None:
        raise Permanent("no hook for this kind")

    return app


async def _run_jobs(app: Herald, settings: Settings, specs: list[JobSpec]) -> list[Job]:
    async with await Client.open(app, settings) as client:
        ids = [e.id for e in await client.enqueue_many(specs)]
        async with workers(app, settings, 1, concurrency=4):
            deadline = time.monotonic() + 30
            while True:
                rows = [await client.get_job(i) for i in ids]
                if all(r is not None and r.finished_at is not None for r in rows):
                    return [r for r in rows if r is not None]
                assert time.monotonic() < deadline, rows
                await asyncio.sleep(0.05)


async def _dead_letter(conn: AsyncConn, job_id: int) -> Row:
    cur = await conn.execute(
        "SELECT *, extract(epoch FROM cleanup_next_at - herald_now())::float8 AS due_in "
        "FROM dead_letters WHERE job_id = %s",
        (job_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def _shift_clock(conn: AsyncConn, seconds: float) -> None:
    await conn.execute("SELECT set_config('herald.clock_offset', %s, false)", (f"{seconds} s",))


async def test_failing_hook_is_retried_with_capped_backoff_until_done(settings: Settings) -> None:
    calls: list[dict[str, Any]] = []
    app = _publishing_app(calls, failures=4)
    (job,) = await _run_jobs(app, settings, [JobSpec("publish", {"n": 1, "fail": True})])
    assert job.state == "dead"

    assert settings.database_url is not None
    # The runner works on one connection whose clock the test moves forward, so the
    # backoff delays are real database delays without real waiting.
    async with await connect(conninfo(settings.database_url, settings.schema)) as conn:
        backoff = Backoff(base=60.0, factor=2.0, cap=200.0, jitter=0.0)
        runner = cleanup.CleanupRunner(app, conn, backoff=backoff, lease=30.0)
        offset = 0.0
        expected_delays = [60.0, 120.0, 200.0, 200.0]  # doubling, then capped
        for attempt, delay in enumerate(expected_delays, start=1):
            assert await runner.run_once() == 1
            dead = await _dead_letter(conn, job.id)
            assert dead["cleanup_state"] == "pending"  # never silently given up
            assert dead["cleanup_attempts"] == attempt
            assert dead["cleanup_last_error"] == (
                f"ConnectionError: data service unreachable (call {attempt})"
            )
            assert delay - 5 < dead["due_in"] <= delay
            # Not due yet: a pass now leaves it alone.
            assert await runner.run_once() == 0
            offset += dead["due_in"] + 0.001
            await _shift_clock(conn, offset)

        assert await runner.run_once() == 1
        dead = await _dead_letter(conn, job.id)
        assert dead["cleanup_state"] == "done"
        assert dead["cleanup_attempts"] == 5
        assert dead["cleanup_done_at"] is not None
        # Done is final: later passes never call the hook again.
        await _shift_clock(conn, offset + 10_000)
        assert await runner.run_once() == 0
        assert len(calls) == 5
        # The hook saw what the failed attempt had produced.
        assert calls[0]["cleanup"] == {"files": ["export-1.csv"]}
        assert calls[0]["job_id"] == job.id
        assert runner.stats.failed == 4 and runner.stats.done == 1
        assert (await cleanup.backlog(conn)).pending == 0


async def test_succeeded_jobs_are_never_cleaned_up(settings: Settings) -> None:
    calls: list[dict[str, Any]] = []
    app = _publishing_app(calls, failures=0)
    specs = [JobSpec("publish", {"n": n, "fail": n % 3 == 0}) for n in range(9)]
    specs.append(JobSpec("plain"))
    rows = await _run_jobs(app, settings, specs)
    dead_ids = {r.id for r in rows if r.state == "dead"}
    succeeded = {r.id for r in rows if r.state == "succeeded"}
    assert len(succeeded) == 6 and len(dead_ids) == 4

    assert settings.database_url is not None
    async with await connect(conninfo(settings.database_url, settings.schema)) as conn:
        backlog = await cleanup.backlog(conn)
        assert backlog.pending == 4 and backlog.oldest_pending_s is not None
        # Two runners at once: each record is claimed by exactly one of them.
        async with await connect(conninfo(settings.database_url, settings.schema)) as other:
            runners = [cleanup.CleanupRunner(app, c, backoff=FAST, batch=2) for c in (conn, other)]
            while sum(await asyncio.gather(*(r.run_once() for r in runners))):
                pass
        cur = await conn.execute(
            "SELECT job_id, kind, cleanup_state FROM dead_letters ORDER BY job_id"
        )
        letters = await cur.fetchall()
    assert {r["job_id"] for r in letters} == dead_ids
    assert sorted(c["job_id"] for c in calls) == sorted(dead_ids - {max(dead_ids)})  # not "plain"
    assert not {c["job_id"] for c in calls} & succeeded
    states = {r["kind"]: r["cleanup_state"] for r in letters}
    assert states == {"publish": "done", "plain": "not_needed"}


async def test_runner_loop_works_through_the_log_and_stops(settings: Settings) -> None:
    calls: list[dict[str, Any]] = []
    app = _publishing_app(calls, failures=1)
    await _run_jobs(app, settings, [JobSpec("publish", {"n": 7, "fail": True})])
    runner = await cleanup.CleanupRunner.open(app, settings, interval=0.05, backoff=FAST)
    try:
        stopping = asyncio.Event()
        task = asyncio.create_task(runner.run(stopping))

        async def cleaned() -> bool:
            return runner.stats.done >= 1

        await eventually(cleaned, what="a cleanup to be done")
        stopping.set()
        await asyncio.wait_for(task, 10)
        assert (await cleanup.backlog(runner.source)).pending == 0
    finally:
        await runner.close()
    assert runner.stats.failed == 1 and len(calls) == 2


async def test_an_expired_claim_is_taken_over_and_its_late_outcome_ignored(
    settings: Settings,
) -> None:
    """A runner that hangs past its claim loses the record to another runner; what the
    first one reports afterwards is fenced out by the attempt number."""
    release = asyncio.Event()
    entered = asyncio.Event()
    calls: list[int] = []
    app = _publishing_app([], failures=0)

    async def slow_then_fine(dead: dict[str, Any]) -> None:
        calls.append(dead["cleanup_attempts"])
        if len(calls) == 1:
            entered.set()
            await release.wait()
            raise ConnectionError("too late anyway")

    app.kind("publish").compensate = slow_then_fine
    (job,) = await _run_jobs(app, settings, [JobSpec("publish", {"n": 3, "fail": True})])
    assert settings.database_url is not None
    info = conninfo(settings.database_url, settings.schema)
    async with await connect(info) as first_conn, await connect(info) as second_conn:
        first = cleanup.CleanupRunner(app, first_conn, lease=30.0, backoff=FAST)
        second = cleanup.CleanupRunner(app, second_conn, lease=30.0, backoff=FAST)
        hung = asyncio.create_task(first.run_once())
        await asyncio.wait_for(entered.wait(), 10)
        assert await second.run_once() == 0  # claimed by the first runner: left alone
        await _shift_clock(second_conn, 31)  # ... until its claim has expired
        assert await second.run_once() == 1
        release.set()
        assert await asyncio.wait_for(hung, 10) == 1
        dead = await _dead_letter(second_conn, job.id)
    assert calls == [1, 2]
    assert dead["cleanup_state"] == "done" and dead["cleanup_attempts"] == 2
    assert dead["cleanup_last_error"] is None  # the late failure was not recorded
    assert first.stats.superseded == 1 and first.stats.failed == 0
    assert second.stats.done == 1
