"""One attempt: run a job's handler (or its pipeline's remaining steps) and turn how it
ended into the outcome to record.

A return is a success; what a handler raises says what to do next (:mod:`herald.errors`);
any other exception and a timeout are retryable failures. A lost lease records nothing:
the attempt's result belongs to nobody any more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from herald.context import JobContext
from herald.encoding import dump_result
from herald.errors import Cancel, LeaseLost, Permanent, Retry, Snooze
from herald.outcomes import SHUTDOWN_ERROR, Outcome, encode_error
from herald.registry import Herald, Kind, call

log = logging.getLogger(__name__)


class Deadlines:
    """Attempt timeouts kept with one timer per group of attempts, not one each.

    Attempts that begin in the same millisecond with the same timeout (a claimed batch
    starts together) share a timer: ``asyncio.timeout``'s timer and bookkeeping for every
    attempt cost a short job a tenth of the worker's CPU. A group's deadline is the end
    of its millisecond plus the timeout: never early, at most 1 ms late. Then every
    attempt of the group still running is cancelled and ends as a timeout.
    """

    def __init__(self) -> None:
        self._open: _Group | None = None  # the group attempts beginning now join

    def enter(self, timeout: float, ctx: JobContext) -> _Group:
        ms = int(ctx.loop.time() * 1000.0) + 1
        group = self._open
        if group is None or group.ms != ms or group.timeout != timeout or group.timer is None:
            group = self._open = _Group(timeout, ms)
            group.timer = ctx.loop.call_at(ms / 1000.0 + timeout, self._expire, group)
        group.members.add(ctx)
        return group

    def leave(self, group: _Group, ctx: JobContext) -> None:
        members = group.members
        members.discard(ctx)
        if not members and group.timer is not None:
            group.timer.cancel()
            group.timer = None  # an empty group takes no one any more

    def _expire(self, group: _Group) -> None:
        group.timer = None
        for ctx in list(group.members):
            ctx.time_out()

    def timers(self) -> int:
        """Timers set and not yet done with (0 when no attempt runs)."""
        group = self._open
        return 0 if group is None or group.timer is None else 1


class _Group:
    __slots__ = ("members", "ms", "timeout", "timer")

    def __init__(self, timeout: float, ms: int) -> None:
        self.timeout = timeout
        self.ms = ms
        self.members: set[JobContext] = set()
        self.timer: asyncio.TimerHandle | None = None


async def run_attempt(
    app: Herald, ctx: JobContext, payload: dict[str, Any], deadlines: Deadlines | None = None
) -> Outcome | None:
    """Run the attempt to its end; None when there is nothing to record.

    ``deadlines``: where the attempt's timeout is kept (the worker's, shared by its
    attempts); without one, by ``asyncio.timeout``."""
    job, fence = ctx.job_id, ctx.fence
    try:
        kind = app.kind(ctx.kind)
        if kind.timeout is None:
            result = await _steps(kind, ctx, payload)
        elif deadlines is None:
            async with asyncio.timeout(kind.timeout):
                result = await _steps(kind, ctx, payload)
        else:
            group = deadlines.enter(kind.timeout, ctx)
            try:
                result = await _steps(kind, ctx, payload)
            finally:
                deadlines.leave(group, ctx)
        if ctx.completed_in_transaction:
            return None
        return Outcome(job, fence, "succeeded", result=dump_result(result))
    except asyncio.CancelledError as exc:
        if ctx.lease_lost:
            return None
        if ctx.timed_out:  # cancelled by its deadline (Deadlines): a timeout, as above
            timed_out = TimeoutError()
            timed_out.__cause__ = exc
            error = encode_error("timeout", timed_out, "handler timed out")
            return Outcome(job, fence, "retry", delay=_backoff(app, ctx), error=error)
        # Cancelled by shutdown: hand the job back now rather than wait for the rescuer.
        return Outcome(job, fence, "retry", delay=0.0, error=SHUTDOWN_ERROR)
    except LeaseLost:
        return None
    except Snooze as exc:
        return Outcome(job, fence, "snooze", delay=exc.seconds)
    except Permanent as exc:
        log.warning("job %d (%s) failed permanently: %s", job, ctx.kind, exc)
        return Outcome(job, fence, "dead", error=encode_error("permanent", exc))
    except Cancel as exc:
        return Outcome(job, fence, "cancelled", error=encode_error("cancelled", exc))
    except Retry as exc:
        delay = exc.delay if exc.delay is not None else _backoff(app, ctx)
        return Outcome(job, fence, "retry", delay=delay, error=encode_error("retry", exc))
    except TimeoutError as exc:
        error = encode_error("timeout", exc, "handler timed out")
        return Outcome(job, fence, "retry", delay=_backoff(app, ctx), error=error)
    except Exception as exc:  # any unexpected exception is a retryable failure
        # The traceback goes to the log only: the API shows type and message.
        log.warning("job %d (%s) failed: %r", job, ctx.kind, exc, exc_info=exc)
        error = encode_error("exception", exc)
        return Outcome(job, fence, "retry", delay=_backoff(app, ctx), error=error)


def _backoff(app: Herald, ctx: JobContext) -> float:
    try:
        return app.kind(ctx.kind).backoff.delay(ctx.attempt)
    except Exception:
        return 1.0


def _steps(kind: Kind, ctx: JobContext, payload: dict[str, Any]) -> Awaitable[Any]:
    """What to await for the attempt: a plain async task's handler itself, without the
    wrappers of the general path (a coroutine each, on every short job's path)."""
    if kind.pipeline or kind.gates or not kind.steps[0].is_async:
        return _run_steps(kind, ctx, payload)
    awaitable: Awaitable[Any] = kind.steps[0].handler(ctx, payload)
    return awaitable


async def _run_steps(kind: Kind, ctx: JobContext, payload: dict[str, Any]) -> Any:
    for gate in kind.gates.values():  # may raise Snooze: not an attempt
        await gate(ctx.pool, ctx, payload)
    if not kind.pipeline:
        step = kind.steps[0]
        return await call(step.handler, step.is_async, ctx, payload)
    start = kind.first_step_index(ctx.step)
    result: Any = None
    for index in range(start, len(kind.steps)):
        step = kind.steps[index]
        ctx.step = step.name
        ctx.checkpoint_skipped = False
        result = await call(step.handler, step.is_async, ctx, payload)
        update = result if isinstance(result, dict) else {}
        if index + 1 < len(kind.steps) and not ctx.checkpoint_skipped:
            # Progress is durable before the next step starts: a retry resumes there.
            await ctx.save_checkpoint(update, step=kind.steps[index + 1].name)
        else:  # the last step (its completion records it), or one safe to run again
            ctx.checkpoint = {**ctx.checkpoint, **update}
    return result
