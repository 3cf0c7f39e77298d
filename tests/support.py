"""The job kinds tests run, importable by worker subprocesses as ``tests.support:APP``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

from herald import Backoff, Herald, JobContext, Permanent, Snooze
from herald.errors import Cancel

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
    return {"files": [f"file-{ctx.attempt}"], "got_on_attempt": ctx.attempt}


@pipe.step("persist_data")
async def persist_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    if ctx.attempt < int(payload.get("persist_fails_until", 0)):
        raise RuntimeError("persist failed")
    return {"persisted": ctx.checkpoint["files"], "persisted_on_attempt": ctx.attempt}
