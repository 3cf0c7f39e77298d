"""Claiming ahead (herald.worker): while handlers are short, a worker keeps the next jobs
leased before a slot frees, so its next claim is in flight while handlers run. It never
runs more than its concurrency, never claims ahead behind long handlers, and a graceful
stop runs the jobs it claimed ahead too (their claim counted the attempt)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from herald import Client, Herald, JobContext, JobSpec, Settings, Worker
from tests.eventually import eventually

app = Herald()


class Watch:
    """What the handlers saw: how many ran at once, and how many jobs their worker held
    not yet run to their end (running, or claimed ahead)."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.live = 0
        self.most_live = 0
        self.most_held = 0
        self.release = asyncio.Event()

    def begin(self) -> None:
        self.live += 1
        self.most_live = max(self.most_live, self.live)
        if self.worker is not None:
            unfinished = sum(1 for h in self.worker.lease.jobs.values() if h.running)
            self.most_held = max(self.most_held, unfinished)


WATCH = Watch()


@app.task("ahead.quick", queue="ahead")
async def quick(ctx: JobContext, payload: dict[str, Any]) -> None:
    WATCH.begin()  # and done: a handler that never waits (short even on a busy machine)
    WATCH.live -= 1


@app.task("ahead.slow", queue="ahead")
async def slow(ctx: JobContext, payload: dict[str, Any]) -> None:
    WATCH.begin()
    await asyncio.sleep(0.03)
    WATCH.live -= 1


@app.task("ahead.blocked", queue="ahead")
async def blocked(ctx: JobContext, payload: dict[str, Any]) -> None:
    WATCH.begin()
    await WATCH.release.wait()
    WATCH.live -= 1


@pytest.fixture
async def watch() -> AsyncIterator[Watch]:
    global WATCH
    WATCH = Watch()
    yield WATCH


async def _jobs(client: Client, kind: str) -> list[dict[str, Any]]:
    async with client.pool.connection() as conn:
        cur = await conn.execute(
            b"SELECT id, state::text, attempt, fence, errors, strikes, snoozes FROM jobs "
            b"WHERE kind = %s ORDER BY id",
            [kind],
        )
        return await cur.fetchall()


def _holds(check: Any) -> Any:
    """An async probe for eventually() of a plain condition."""

    async def probe() -> bool:
        return bool(check())

    return probe


async def _run(worker: Worker, watch: Watch) -> asyncio.Task[None]:
    watch.worker = worker
    task = asyncio.create_task(worker.run())
    await eventually(_holds(worker.ready.is_set), what="the worker's first claim", within=30)
    return task


async def _drain(settings: Settings, watch: Watch, kind: str, jobs: int) -> Worker:
    """``jobs`` jobs of ``kind`` drained by a worker of concurrency 4, then stopped."""
    async with await Client.open(app, settings) as client:
        await client.enqueue_many([JobSpec(kind, {"n": n}) for n in range(jobs)])
        worker = Worker(app, concurrency=4, settings=settings, maintenance=False)
        task = await _run(worker, watch)

        async def drained() -> bool:
            return all(j["state"] == "succeeded" for j in await _jobs(client, kind))

        await eventually(drained, what="every job to succeed", within=60)
        worker.stop()
        await asyncio.wait_for(task, 30)
        ran = await _jobs(client, kind)
    assert [(j["attempt"], j["fence"]) for j in ran] == [(1, 1)] * jobs
    return worker


async def test_short_handlers_are_claimed_ahead_and_never_run_past_the_concurrency(
    settings: Settings, watch: Watch
) -> None:
    worker = await _drain(settings, watch, "ahead.quick", 300)
    assert worker.stats.claimed == 300
    assert watch.most_live <= 4
    assert watch.most_held > 4  # it did hold jobs beyond its slots


async def test_behind_long_handlers_nothing_is_claimed_ahead(
    settings: Settings, watch: Watch
) -> None:
    await _drain(settings, watch, "ahead.slow", 40)
    assert watch.most_live <= 4
    assert watch.most_held <= 4


async def test_a_graceful_stop_runs_the_jobs_claimed_ahead_as_slots_free(
    settings: Settings, watch: Watch
) -> None:
    async with await Client.open(app, settings) as client:
        # Short handlers first (the worker learns they are short), then two that block
        # both slots while two more of their kind wait, claimed ahead.
        await client.enqueue_many([JobSpec("ahead.quick", {"n": n}) for n in range(50)])
        await client.enqueue_many([JobSpec("ahead.blocked", {"n": n}) for n in range(4)])
        worker = Worker(app, concurrency=2, settings=settings, maintenance=False)
        task = await _run(worker, watch)
        await eventually(
            _holds(lambda: len(worker._ahead) == 2), what="two jobs claimed ahead", within=30
        )
        worker.stop()  # claims no more; what it holds still runs, within the grace
        await asyncio.sleep(0.2)
        assert len(worker._ahead) == 2 and watch.live == 2
        watch.release.set()
        await asyncio.wait_for(task, 30)
        jobs = await _jobs(client, "ahead.blocked")
    assert [(j["state"], j["attempt"], j["fence"]) for j in jobs] == [("succeeded", 1, 1)] * 4
    assert all(j["errors"] == [] and j["strikes"] == 0 for j in jobs)
    assert worker.stats.claimed == 54
    assert watch.most_live <= 2
