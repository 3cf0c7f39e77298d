"""The periodic loops of Herald's processes (rescuer and pruner, scheduler, cleanup runner,
housekeeping), and the signals that stop them.

A loop runs a pass, then waits its interval or until it is told to stop, whichever comes
first. A pass that fails is logged and the loop carries on: a database restart, a network
blip or a surprise in one pass must not end a process that is meant to run for months.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator

# A pass may return how long to wait before the next one (sooner while work remains);
# None waits the loop's interval.
Pass = Callable[[], Awaitable[float | None]]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def pause(stopping: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` or until ``stopping`` is set; True when it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
    return stopping.is_set()


async def run_periodically(
    one_pass: Pass,
    *,
    every: float,
    stopping: asyncio.Event,
    what: str,
    log: logging.Logger,
    errors: tuple[type[Exception], ...] = (Exception,),
    on_error: Callable[[Exception], None] | None = None,
    traceback: bool = False,
) -> None:
    """Run ``one_pass`` every ``every`` seconds until ``stopping`` is set.

    An exception of ``errors`` is counted by ``on_error``, logged as ``"<what> failed"``,
    and the next pass comes after the usual interval; any other exception ends the loop.
    """
    while not stopping.is_set():
        wait = every
        try:
            asked = await one_pass()
            if asked is not None:
                wait = asked
        except errors as exc:
            if on_error is not None:
                on_error(exc)
            log.warning(
                "%s failed (%s); will try again in %.1fs", what, exc, every, exc_info=traceback
            )
        await pause(stopping, wait)


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` on SIGTERM and SIGINT while the block runs (then restore defaults)."""
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop)
    try:
        yield
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
