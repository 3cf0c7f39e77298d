"""Attempt timeouts kept by the worker's shared timers (herald.attempt.Deadlines): the
attempts that begin together share one timer, and at its deadline only the attempts
still running are cancelled, as timeouts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from herald.attempt import Deadlines, run_attempt
from herald.config import Settings
from herald.context import JobContext
from herald.lease import Lease, WorkerStats
from herald.outcomes import Outcome
from herald.registry import Herald

app = Herald()


@app.task("sleeper", timeout=0.2)
async def sleeper(ctx: JobContext, payload: dict[str, Any]) -> str:
    await asyncio.sleep(float(payload["sleep"]))
    return "woke"


def _context(lease: Lease, job_id: int) -> JobContext:
    row = {
        "id": job_id,
        "fence": 1,
        "kind": "sleeper",
        "queue": "default",
        "key": None,
        "version": 1,
        "attempt": 1,
        "max_attempts": 3,
        "step": None,
        "checkpoint": None,
        "tenant_id": "default",
    }
    return JobContext(lease, lease.hold(row, time.monotonic()), row)


async def test_attempts_begun_together_share_one_timer_and_only_late_ones_time_out() -> None:
    lease = Lease("me", Settings(), WorkerStats())
    deadlines = Deadlines()
    quick, slow = _context(lease, 1), _context(lease, 2)
    ended: dict[int, Outcome | None] = {}

    async def attempt(ctx: JobContext, sleep: float) -> None:
        ended[ctx.job_id] = await run_attempt(app, ctx, {"sleep": sleep}, deadlines)

    tasks = []
    for ctx, sleep in ((quick, 0.0), (slow, 5.0)):
        task = asyncio.create_task(attempt(ctx, sleep))
        lease.jobs[ctx.job_id].task = task  # as the worker does
        tasks.append(task)
    await asyncio.sleep(0)  # both began (in the same millisecond, on a quiet loop)
    assert deadlines.timers() == 1  # one timer for both
    began = time.monotonic()
    await asyncio.gather(*tasks)
    waited = time.monotonic() - began
    assert ended[1] is not None and ended[1].outcome == "succeeded"
    assert ended[2] is not None and ended[2].outcome == "retry"
    assert ended[2].error is not None and "handler timed out" in ended[2].error
    assert slow.timed_out and not quick.timed_out
    assert 0.15 < waited < 2.0
    assert deadlines.timers() == 0  # the timer went with its attempts


async def test_a_group_whose_attempts_all_ended_leaves_no_timer_behind() -> None:
    lease = Lease("me", Settings(), WorkerStats())
    deadlines = Deadlines()
    contexts = [_context(lease, n) for n in range(1, 51)]
    outcomes = await asyncio.gather(
        *(run_attempt(app, ctx, {"sleep": 0.0}, deadlines) for ctx in contexts)
    )
    assert [o.outcome for o in outcomes if o is not None] == ["succeeded"] * 50
    assert deadlines.timers() == 0
