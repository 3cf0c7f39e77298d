"""The periodic-loop helper every long-running loop of Herald is built on."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from herald.periodic import pause, run_periodically, stop_on_signals
from tests.eventually import eventually

log = logging.getLogger("tests.periodic")


async def test_a_failing_pass_is_counted_and_the_loop_carries_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stopping = asyncio.Event()
    passes: list[int] = []
    errors: list[Exception] = []

    async def one_pass() -> None:
        passes.append(len(passes))
        if len(passes) == 2:
            raise OSError("the database went away")
        if len(passes) == 4:
            stopping.set()

    with caplog.at_level(logging.WARNING, logger="tests.periodic"):
        await asyncio.wait_for(
            run_periodically(
                one_pass,
                every=0.01,
                stopping=stopping,
                what="test pass",
                log=log,
                on_error=errors.append,
            ),
            10,
        )
    assert passes == [0, 1, 2, 3]
    assert [str(e) for e in errors] == ["the database went away"]
    assert "test pass failed (the database went away)" in caplog.text


async def test_an_error_it_was_not_told_to_survive_ends_the_loop() -> None:
    async def one_pass() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        await run_periodically(
            one_pass, every=0.01, stopping=asyncio.Event(), what="x", log=log, errors=(OSError,)
        )


async def test_a_pass_may_ask_for_a_shorter_wait_and_stopping_cuts_the_wait_short() -> None:
    stopping = asyncio.Event()
    passes = 0

    async def one_pass() -> float | None:
        nonlocal passes
        passes += 1
        return 0.0 if passes < 5 else None  # then the interval: an hour

    loop = asyncio.create_task(
        run_periodically(one_pass, every=3600, stopping=stopping, what="x", log=log)
    )

    async def five_passes() -> bool:
        return passes >= 5

    await eventually(five_passes, what="five passes without waiting")
    stopping.set()
    await asyncio.wait_for(loop, 10)  # not an hour
    assert passes == 5
    assert await pause(stopping, 3600)


async def test_the_stop_signals_call_stop_while_installed() -> None:
    stopped = asyncio.Event()
    with stop_on_signals(stopped.set):
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stopped.wait(), 10)
    loop = asyncio.get_running_loop()
    assert not loop.remove_signal_handler(signal.SIGTERM)  # removed on the way out
