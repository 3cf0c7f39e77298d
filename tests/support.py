"""The job kinds tests run, importable by worker subprocesses as ``tests.support:APP``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from herald import Backoff, Client, Herald, JobContext, Permanent, Retry, Settings, Snooze, Worker
from herald.errors import Cancel
from herald.rows import to_dict
from tests.eventually import eventually

APP = Herald()
FAST = Backoff(base=0.05, factor=2.0, cap=0.2, jitter=0.1)


@APP.task("noop", backoff=FAST)
async def noop(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@APP.task("echo", backoff=FAST)
async def echo(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {"echo": payload, "attempt": ctx.attempt}


@APP.task("effect", backoff=FAST)
async def effect(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Records its effect in the same transaction as its completion: exactly once."""
    delay = float(payload.get("sleep", 0))
    if delay:
        await asyncio.sleep(delay)
    async with ctx.transaction() as conn:
        await conn.execute(
            _EFFECT,
            (ctx.job_id, ctx.attempt, ctx.worker_id),
        )


_EFFECT = "INSERT INTO effects (job_id, attempt, worker) VALUES (%s, %s, %s)"


@APP.task("sleepy", backoff=FAST)
async def sleepy(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Sleeps, then returns who finished it; used by kill and zombie scenarios."""
    await asyncio.sleep(float(payload.get("sleep", 1.0)))
    return {"worker": ctx.worker_id, "pid": os.getpid(), "attempt": ctx.attempt}


@APP.task("crash", backoff=FAST)
def crash(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Takes its whole worker process down, every time."""
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)


@APP.task("fail", backoff=FAST)
async def fail(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise RuntimeError(f"failure on attempt {ctx.attempt}")


@APP.task("permanent", backoff=FAST)
async def permanent(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise Permanent("this request can never succeed")


@APP.task("snoozer", backoff=FAST)
async def snoozer(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    seen = int(ctx.checkpoint.get("snoozes", 0))
    if seen < int(payload.get("times", 2)):
        await ctx.save_checkpoint({"snoozes": seen + 1})
        raise Snooze(0.05, "rate limited")
    return {"attempt": ctx.attempt}


@APP.task("canceller", backoff=FAST)
async def canceller(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise Cancel("not needed any more")


@APP.task("sync_sleep", backoff=FAST)
def sync_sleep(ctx: JobContext, payload: dict[str, Any]) -> str:
    time.sleep(float(payload.get("sleep", 0.01)))
    return "slept"


pipe = APP.pipeline("two_steps", steps=["get_data", "persist_data"], backoff=FAST)


@pipe.step("get_data")
async def get_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    if payload.get("cheap_get"):
        ctx.skip_checkpoint()
    return {"files": [f"file-{ctx.attempt}"], "got_on_attempt": ctx.attempt}


@pipe.step("persist_data")
async def persist_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    if ctx.attempt < int(payload.get("persist_fails_until", 0)):
        raise RuntimeError("persist failed")
    return {"persisted": ctx.checkpoint["files"], "persisted_on_attempt": ctx.attempt}


# --- kinds and helpers of the in-process engine tests ------------------------------------

SLOW = Backoff(base=100.0, factor=5.0, cap=1000.0, jitter=0.2)
TERMINAL = frozenset({"succeeded", "dead", "cancelled"})


@APP.task("slow_retry", backoff=SLOW)
async def slow_retry(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise RuntimeError("try again much later")


@APP.task("keeper", keep_forever=True)
async def keeper(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A kind whose finished records are kept forever (as published versions are)."""


@APP.task("brief", retention=60.0)
async def brief(ctx: JobContext, payload: dict[str, Any]) -> None:
    """A kind whose finished records are kept for one minute only."""


@APP.task("timeboxed", backoff=FAST, timeout=0.2)
async def timeboxed(ctx: JobContext, payload: dict[str, Any]) -> str:
    await asyncio.sleep(float(payload.get("sleep", 0.0)) if ctx.attempt == 1 else 0.0)
    return f"finished on attempt {ctx.attempt}"


@APP.task("which_thread", backoff=FAST)
def which_thread(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """A sync handler: reports the thread it ran on."""
    return {"thread": threading.current_thread().name, "main": threading.main_thread().name}


@contextlib.asynccontextmanager
async def running_worker(settings: Settings, **options: Any) -> AsyncIterator[Worker]:
    """A worker running in this event loop until the block ends (then drained)."""
    worker = Worker(APP, settings=settings, **options)
    task = asyncio.create_task(worker.run())
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait([task, ready], timeout=30, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if task.done():
        task.result()  # raise whatever stopped it
    if not worker.ready.is_set():
        task.cancel()
        raise AssertionError("the worker did not make its first claim within 30 s")
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def wait_for_job(
    client: Client,
    job_id: int,
    until: Callable[[dict[str, Any]], Any] | None = None,
    limit: float = 30.0,
) -> dict[str, Any]:
    """Poll the job's row until ``until(row)`` holds (default: a terminal state).

    The row is the job's columns as a mapping (``herald.rows.to_dict``), states as their
    text, so a test compares it with the values it expects. ``limit`` only guards
    against a hang; it is no statement about speed.
    """
    check = until or (lambda row: row["state"] in TERMINAL)

    async def reached() -> dict[str, Any] | None:
        job = await client.get_job(job_id)
        row = None if job is None else to_dict(job)
        return row if row is not None and check(row) else None

    return await eventually(
        reached, what=f"job {job_id} to reach the expected state", within=limit, interval=0.02
    )


@APP.task("nul_result", backoff=FAST)
async def nul_result(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Returns text PostgreSQL's JSON cannot hold as it is (a NUL character)."""
    return {"text": "a\x00b", "literal": "C:\\u0000"}


@APP.task("odd_result", backoff=FAST, max_attempts=1)
async def odd_result(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """A result JSON cannot hold as given (a datetime, a NUL), returned or committed with
    ``ctx.transaction(result)`` as the payload says: both must store it the same way."""
    result = {"at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "text": "a\x00b"}
    if payload.get("transaction"):
        async with ctx.transaction(result):
            pass
    return result


@APP.task("nul_error", backoff=FAST, max_attempts=1)
async def nul_error(ctx: JobContext, payload: dict[str, Any]) -> None:
    raise RuntimeError("bad\x00byte")


@APP.task("endless_delay", backoff=FAST, max_attempts=2)
async def endless_delay(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Asks for a retry delay no clock can represent."""
    raise Retry("later", delay=float(payload.get("delay", "inf")))


@APP.task("gate", backoff=FAST, max_attempts=1)
def gate(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Fails for good until the file its payload names exists in $HERALD_TEST_GATE_DIR (an
    upstream being fixed): the console's tests let it die, fix it, and replay it."""
    folder = os.environ.get("HERALD_TEST_GATE_DIR", "")
    name = os.path.basename(str(payload["gate"]))
    if not folder or not os.path.exists(os.path.join(folder, name)):
        raise Permanent(f"upstream not ready: {name} is missing")
    return {"passed": True, "attempt": ctx.attempt}


# (job id, fence, wall-clock time) of every "external call" a ticker handler made.
TICKS: list[tuple[int, int, float]] = []


@APP.task("ticker", backoff=FAST)
async def ticker(ctx: JobContext, payload: dict[str, Any]) -> None:
    """Calls an outside system (here: a list) every 50 ms for ``seconds`` seconds."""
    end = time.monotonic() + float(payload.get("seconds", 1.0))
    while time.monotonic() < end:
        TICKS.append((ctx.job_id, ctx.fence, time.time()))
        await asyncio.sleep(0.05)


def _spin(seconds: float) -> int:
    """Pure-Python computation for ``seconds`` (it never waits on anything)."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += sum(i * i for i in range(200))
    return n


@APP.task("crunch", backoff=FAST)
def crunch(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """CPU-bound, done right: a plain def handler runs on the worker's thread pool."""
    _spin(float(payload["seconds"]))
    ctx.ensure_lease()  # before an external effect: still ours?
    return {"attempt": ctx.attempt}


@APP.task("hog", backoff=FAST)
async def hog(ctx: JobContext, payload: dict[str, Any]) -> None:
    """CPU-bound, done wrong: computes inside the event loop without awaiting."""
    _spin(float(payload["seconds"]))


@APP.task("tenant_probe", backoff=FAST)
async def tenant_probe(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Which tenant the handler acts for, as it and as the database see it."""
    from herald import tenancy

    async with ctx.pool.connection() as conn:
        cur = await conn.execute("SELECT herald_tenant() AS db, count(*) AS jobs FROM jobs")
        row = await cur.fetchone()
    assert row is not None
    return {"context": tenancy.current(), "db": row["db"], "visible_jobs": row["jobs"]}
