"""Waiting in tests: poll a probe until it answers, with a limit that only guards a hang.

Every "wait until" of the suite goes through these two, so a hang fails the same way
everywhere: with what was awaited, the probe's last answer and, when given, a report
(a worker's log, a server's output). A probe may raise to fail at once (a job that
failed where the test waits for success, a server process that exited).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def _timed_out(what: str, within: float, last: Any, report: Callable[[], str] | None) -> str:
    extra = f"\n{report()}" if report is not None else ""
    return f"timed out after {within:.0f}s waiting for {what} (last: {last!r}){extra}"


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    what: str,
    within: float = 30.0,
    interval: float = 0.05,
    report: Callable[[], str] | None = None,
) -> T:
    """Await ``probe()`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + within
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(what, within, last, report))
        await asyncio.sleep(interval)


def eventually_sync(
    probe: Callable[[], T | None],
    *,
    what: str,
    within: float = 30.0,
    interval: float = 0.2,
    report: Callable[[], str] | None = None,
) -> T:
    """:func:`eventually` for code without an event loop (fixtures, subprocess tests)."""
    deadline = time.monotonic() + within
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(_timed_out(what, within, last, report))
        time.sleep(interval)
