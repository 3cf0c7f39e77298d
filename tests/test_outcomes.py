"""What each handler outcome does to a job, run by a real in-process worker."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from herald import Client, Herald, JobContext, JobSpec, Settings, Worker, sql
from herald.client import open_connection
from herald.db import AsyncConn
from herald.migrate import SchemaNotMigrated
from tests.support import APP, running_worker, wait_for_job


async def _rows(client: Client, query: str, *params: Any) -> list[dict[str, Any]]:
    async with client.pool.connection() as conn:
        cur = await conn.execute(query.encode(), params or None)
        return await cur.fetchall()


async def test_success_records_the_result(settings: Settings, client: Client) -> None:
    job = await client.enqueue("echo", {"a": 1})
    async with running_worker(settings) as worker:
        row = await wait_for_job(client, job.id)
    assert row["state"] == "succeeded"
    assert row["result"] == {"echo": {"a": 1}, "attempt": 1}
    assert (row["attempt"], row["fence"], row["errors"]) == (1, 1, [])
    assert row["lease_owner"] is None and row["lease_expires_at"] is None
    assert row["finished_at"] is not None
    assert worker.stats.succeeded == 1
    assert await _rows(client, "SELECT * FROM dead_letters") == []


async def test_permanent_failure_is_dead_at_attempt_one_with_its_dead_letter(
    settings: Settings, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    job = await client.enqueue("permanent", {"n": 1}, key="doc-1")
    async with running_worker(settings):
        row = await wait_for_job(client, job.id)
    # The process's log says so too (herald up had no word for a job that stopped).
    assert f"job {job.id} is dead (dead letter written)" in caplog.text
    assert (row["state"], row["attempt"]) == ("dead", 1)
    assert [e["message"] for e in row["errors"]] == ["this request can never succeed"]
    letters = await _rows(client, "SELECT * FROM dead_letters")
    assert len(letters) == 1
    letter = letters[0]
    assert (letter["job_id"], letter["reason"], letter["attempt"]) == (job.id, "permanent", 1)
    assert (letter["key"], letter["payload"]) == ("doc-1", {"n": 1})
    # Written by the very statement that made the job dead (same transaction clock).
    assert letter["created_at"] == row["finished_at"]
    dead = await client.list_dead()
    assert [(d.job_id, d.last_error) for d in dead] == [(job.id, "this request can never succeed")]
    # The object is free again: a new version may be admitted.
    again = await client.enqueue("permanent", {"n": 1}, key="doc-1")
    assert again.version == 2


async def test_retries_until_max_attempts_then_dead(settings: Settings, client: Client) -> None:
    job = await client.enqueue("fail")
    async with running_worker(settings) as worker:
        row = await wait_for_job(client, job.id)
    assert (row["state"], row["attempt"], row["fence"]) == ("dead", 3, 3)
    assert [(e["attempt"], e["kind"]) for e in row["errors"]] == [
        (1, "exception"),
        (2, "exception"),
        (3, "exception"),
    ]
    assert row["errors"][-1]["message"] == "failure on attempt 3"
    assert row["errors"][-1]["type"] == "RuntimeError"
    letter = (await _rows(client, "SELECT * FROM dead_letters"))[0]
    assert (letter["reason"], letter["attempt"], len(letter["errors"])) == ("exhausted", 3, 3)
    assert (worker.stats.retried, worker.stats.dead) == (2, 1)
    listed = await client.list_jobs(state="dead")
    assert [r.last_error for r in listed] == ["failure on attempt 3"]


async def test_snooze_does_not_consume_attempts(settings: Settings, client: Client) -> None:
    job = await client.enqueue("snoozer", {"times": 3}, max_attempts=1)
    async with running_worker(settings) as worker:
        row = await wait_for_job(client, job.id)
    # Three snoozes and a success, all on attempt 1 of 1; four claims moved the fence.
    assert (row["state"], row["attempt"], row["snoozes"], row["fence"]) == (
        "succeeded",
        1,
        3,
        4,
    )
    assert row["result"] == {"attempt": 1}
    assert row["checkpoint"] == {"snoozes": 3}
    assert row["errors"] == []
    assert worker.stats.snoozed == 3


async def test_cancel_stops_the_job_without_a_dead_letter(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("canceller", key="obsolete")
    async with running_worker(settings):
        row = await wait_for_job(client, job.id)
    assert (row["state"], row["attempt"]) == ("cancelled", 1)
    assert row["errors"][-1]["message"] == "not needed any more"
    assert await _rows(client, "SELECT * FROM dead_letters") == []


async def test_pipeline_resumes_at_the_first_unfinished_step(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("two_steps", {"persist_fails_until": 2})
    async with running_worker(settings):
        row = await wait_for_job(client, job.id)
    assert (row["state"], row["attempt"]) == ("succeeded", 2)
    # get_data ran once, on attempt 1; attempt 2 started at persist_data with its output.
    assert row["checkpoint"]["got_on_attempt"] == 1
    assert row["checkpoint"]["files"] == ["file-1"]
    assert row["result"] == {"persisted": ["file-1"], "persisted_on_attempt": 2}
    assert row["step"] == "persist_data"
    assert [(e["attempt"], e["message"]) for e in row["errors"]] == [(1, "persist failed")]


async def test_a_step_that_skips_its_checkpoint_runs_again_on_a_retry(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("two_steps", {"persist_fails_until": 2, "cheap_get": True})
    async with running_worker(settings):
        row = await wait_for_job(client, job.id)
    assert (row["state"], row["attempt"]) == ("succeeded", 2)
    # Nothing was saved after get_data: attempt 2 began there again, and its output (not
    # attempt 1's) reached persist_data.
    assert (row["checkpoint"], row["step"]) == (None, None)
    assert row["result"] == {"persisted": ["file-2"], "persisted_on_attempt": 2}


async def test_timeout_is_a_retryable_failure_and_sync_handlers_use_the_pool(
    settings: Settings, client: Client
) -> None:
    slow = await client.enqueue("timeboxed", {"sleep": 30})
    threaded = await client.enqueue("which_thread")
    async with running_worker(settings):
        slow_row = await wait_for_job(client, slow.id)
        thread_row = await wait_for_job(client, threaded.id)
    assert (slow_row["state"], slow_row["attempt"]) == ("succeeded", 2)
    assert slow_row["result"] == "finished on attempt 2"
    assert [(e["attempt"], e["kind"]) for e in slow_row["errors"]] == [(1, "timeout")]
    assert slow_row["errors"][0]["message"] == "handler timed out"
    assert thread_row["state"] == "succeeded"
    assert thread_row["result"]["thread"].startswith("herald")
    assert thread_row["result"]["thread"] != thread_row["result"]["main"]


async def test_without_notifications_jobs_are_found_by_polling(settings: Settings) -> None:
    quiet = settings.with_(notify=False)
    async with await Client.open(APP, quiet) as client:
        listener = await open_connection(settings)
        async with listener:
            await listener.execute(sql.query_with_identifiers("listen", channel=settings.channel))
            async with running_worker(quiet) as worker:
                assert worker.settings.notify is False
                # The worker is idle and waiting when these arrive: only its poll finds them.
                one = await client.enqueue("echo", {"n": 1})
                many = await client.enqueue_many([JobSpec("echo", {"n": n}) for n in range(5)])
                rows = [await wait_for_job(client, j.id) for j in [one, *many]]
            assert {r["state"] for r in rows} == {"succeeded"}
            # Nothing was notified: the admissions really relied on polling.
            heard = [n async for n in listener.notifies(timeout=0.1)]
            assert heard == []


async def _run(conn: AsyncConn, name: str, **params: Any) -> list[dict[str, Any]]:
    cur = await conn.execute(sql.query(name), params)
    return await cur.fetchall()


def _finish_params(job_id: int, fence: int, owner: str, outcome: str) -> dict[str, Any]:
    return {
        "ids": [job_id],
        "fences": [fence],
        "outcomes": [outcome],
        "delays": [None],
        "errors": [None],
        "results": [json.dumps({"by": owner})],
        "owner": owner,
    }


async def test_a_stale_fenced_write_changes_nothing_and_is_counted(
    settings: Settings, client: Client
) -> None:
    job = await client.enqueue("noop")
    conn = await open_connection(settings)
    async with conn:
        claim = {
            "queues": ["default"],
            "kinds": ["noop"],
            "limit": 10,
            "lease_s": 30.0,
            "suspects": 1,
        }
        first = await _run(conn, "claim", owner="w1", **claim)
        assert [(r["id"], r["fence"]) for r in first] == [(job.id, 1)]
        # w1 stalls past its lease: an hour passes (on this session's database clock),
        # the rescuer hands the job back and w2 claims it.
        await conn.execute("SET herald.clock_offset = '1 hour'")
        assert len(await _run(conn, "rescue", limit=10)) == 1
        second = await _run(conn, "claim", owner="w2", **claim)
        assert [(r["id"], r["fence"], r["attempt"]) for r in second] == [(job.id, 2, 1)]

        # w1 wakes up and writes with its old fence: every write is refused.
        assert await _run(conn, "finish", **_finish_params(job.id, 1, "w1", "succeeded")) == []
        assert (
            await _run(
                conn,
                "heartbeat",
                ids=[job.id],
                fences=[1],
                lease_s=30.0,
                owner="w1",
            )
            == []
        )
        assert (
            await _run(
                conn,
                "checkpoint",
                id=job.id,
                fence=1,
                step="x",
                checkpoint='{"w1": true}',
                owner="w1",
            )
            == []
        )
        row = await client.get_job(job.id)
        assert row is not None
        assert (row.state, row.lease_owner, row.fence) == ("running", "w2", 2)
        assert (row.result, row.checkpoint, row.step) == (None, None, None)

        # w2's own completion counts.
        done = await _run(conn, "finish", **_finish_params(job.id, 2, "w2", "succeeded"))
        assert done == [{"id": job.id, "state": "succeeded"}]
        # And w1 retrying its completion afterwards still changes nothing.
        assert await _run(conn, "finish", **_finish_params(job.id, 1, "w1", "dead")) == []

    row = await client.get_job(job.id)
    assert row is not None and (row.state, row.result) == ("succeeded", {"by": "w2"})
    stale = await _rows(
        client, "SELECT job_id, fence, operation, owner FROM stale_writes ORDER BY id"
    )
    assert stale == [
        {"job_id": job.id, "fence": 1, "operation": "succeeded", "owner": "w1"},
        {"job_id": job.id, "fence": 1, "operation": "heartbeat", "owner": "w1"},
        {"job_id": job.id, "fence": 1, "operation": "checkpoint", "owner": "w1"},
        {"job_id": job.id, "fence": 1, "operation": "dead", "owner": "w1"},
    ]
    assert await client.stale_writes(job.id) == 4
    assert await _rows(client, "SELECT * FROM dead_letters") == []
    rescues = await _rows(client, "SELECT job_id, fence, owner, outcome::text FROM rescues")
    assert rescues == [{"job_id": job.id, "fence": 1, "owner": "w1", "outcome": "waiting"}]


async def test_outcomes_postgres_cannot_store_as_given_do_not_block_the_batch(
    settings: Settings, client: Client
) -> None:
    """A NUL in a result or error, or an impossible delay, must not jam the completer."""
    nul_result = await client.enqueue("nul_result")
    nul_error = await client.enqueue("nul_error")
    endless = await client.enqueue("endless_delay")
    plain = await client.enqueue("echo", {"n": 1})
    async with running_worker(settings):
        rows = {j.id: await wait_for_job(client, j.id) for j in (nul_result, nul_error, plain)}
        later = await wait_for_job(client, endless.id)
    assert rows[plain.id]["state"] == "succeeded"
    assert rows[nul_result.id]["state"] == "succeeded"
    # NUL becomes U+FFFD; a literal backslash-u0000 in the text stays as it was.
    assert rows[nul_result.id]["result"] == {"text": "a\ufffdb", "literal": "C:\\u0000"}
    assert rows[nul_error.id]["state"] == "dead"
    assert rows[nul_error.id]["errors"][-1]["message"] == "bad\ufffdbyte"
    # An impossible delay is a handler error like any other: recorded, retried, dead.
    assert (later["state"], later["attempt"]) == ("dead", 2)
    assert later["errors"][-1]["message"].startswith("retry delay must be between 0 and")


async def test_a_result_is_stored_alike_returned_or_committed_in_a_transaction(
    settings: Settings, client: Client
) -> None:
    returned = await client.enqueue("odd_result", {})
    committed = await client.enqueue("odd_result", {"transaction": True})
    async with running_worker(settings):
        rows = [await wait_for_job(client, j.id) for j in (returned, committed)]
    expected = {"at": "2026-01-02 03:04:05+00:00", "text": "a\ufffdb"}
    assert [(r["state"], r["result"]) for r in rows] == [("succeeded", expected)] * 2


async def test_a_worker_claims_only_the_kinds_it_knows(settings: Settings) -> None:
    """A rolling deploy: a newer application admits a kind this worker does not know;
    the job waits for a worker that knows it instead of failing here."""
    newer = Herald()

    @newer.task("echo")
    async def echo(ctx: JobContext, payload: dict[str, Any]) -> None:
        raise AssertionError("the older worker runs echo, not this application")

    @newer.task("from_the_future")
    async def from_the_future(ctx: JobContext, payload: dict[str, Any]) -> str:
        return "ran"

    async with await Client.open(newer, settings) as newer_client:
        unknown = await newer_client.enqueue("from_the_future")
        known = await newer_client.enqueue("echo", {"n": 1})
        async with running_worker(settings):
            assert (await wait_for_job(newer_client, known.id))["state"] == "succeeded"
            waiting = await newer_client.get_job(unknown.id)
            assert waiting is not None and (waiting.state, waiting.attempt) == ("waiting", 0)
        worker = Worker(newer, settings=settings)
        task = asyncio.create_task(worker.run())
        try:
            row = await wait_for_job(newer_client, unknown.id)
        finally:
            worker.stop()
            await asyncio.wait_for(task, 30)
    assert (row["state"], row["result"]) == ("succeeded", "ran")


async def test_a_worker_on_a_schema_not_migrated_fails_at_once_saying_so(
    settings: Settings,
) -> None:
    bare = replace(settings, schema=settings.schema + "_bare")
    with pytest.raises(SchemaNotMigrated, match="run `herald migrate` first"):
        await asyncio.wait_for(Worker(APP, settings=bare).run(), 30)


def test_herald_worker_before_migrate_exits_with_the_fix(
    database: str,
    schema_name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from herald.cli import main

    monkeypatch.setenv("HERALD_DATABASE_URL", database)
    monkeypatch.setenv("HERALD_SCHEMA", schema_name)
    argv = ["--app", "tests.support:APP", "worker", "--no-maintenance"]
    assert main(argv) == 1
    assert "run `herald migrate` first" in capsys.readouterr().err
