"""Queue depth, running jobs and the oldest due job's age over time: sampled by a
housekeeping duty into ``queue_samples``, drawn per queue on the console's overview.

Samples at other moments are taken with the engine's clock shifted for one session
(``herald.clock_offset``), as a real deployment would have taken them then.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from herald.client import open_connection
from herald.config import Settings
from herald.ops import queue_samples
from herald.ops.housekeeping import Housekeeper
from tests.console_kit import Console, open_console, sign_in
from tests.eventually import eventually
from tests.support import APP


@pytest.fixture
async def console(settings: Settings) -> AsyncIterator[Console]:
    async with open_console(settings) as found:
        yield found


async def _sample_at(console: Console, offset: str) -> None:
    """One sampling pass as if taken ``offset`` from now (e.g. ``-30 minutes``)."""
    async with await open_connection(console.settings) as conn:
        await conn.execute(f"SET herald.clock_offset = '{offset}'".encode())
        await queue_samples.sample_queues(conn)


async def _samples(console: Console) -> list[dict[str, object]]:
    return await console.rows("SELECT at, queues FROM queue_samples ORDER BY at")


def _description(page: str, chart: str) -> str:
    """The text description of chart ``chart`` (e.g. ``dp-1``)."""
    found = re.search(rf'<desc id="{chart}-d">([^<]*)</desc>', page)
    assert found, f"no chart {chart}"
    return html.unescape(found.group(1))


def _chart(page: str, chart: str) -> str:
    found = re.search(rf'<svg[^>]*aria-labelledby="{chart}-t {chart}-d".*?</svg>', page, re.S)
    assert found, f"no chart {chart}"
    return found.group(0)


async def test_samples_record_each_queue_and_are_kept_a_day(console: Console) -> None:
    await _sample_at(console, "0")
    assert [s["queues"] for s in await _samples(console)] == [{}]  # sampled, all idle
    for n in range(3):
        await console.client.enqueue("echo", {"n": n})
    await console.client.enqueue(
        "echo", {}, queue="mail", run_at=datetime.now(UTC) + timedelta(hours=1)
    )
    await _sample_at(console, "-26 hours")  # an old sample, older than what is kept
    await _sample_at(console, "0")
    samples = await _samples(console)
    assert len(samples) == 2  # the 26-hour-old one was dropped by the later pass
    latest = samples[-1]["queues"]
    assert latest == {
        "default": {"available": 3, "scheduled": 0, "running": 0,
                    "oldest_waiting_s": latest["default"]["oldest_waiting_s"]},  # type: ignore[index]
        "mail": {"available": 0, "scheduled": 1, "running": 0, "oldest_waiting_s": None},
    }  # fmt: skip


async def test_the_overview_draws_depth_running_and_waiting_age_over_time(
    console: Console,
) -> None:
    ops = await console.key("ops", ["read"])
    async with console.browser() as http:
        await sign_in(http, ops)
        page = (await http.get("/ui/")).text
        assert "No queue has waiting, running or recently finished jobs" in page

        await _sample_at(console, "-40 minutes")  # the queue was idle then
        jobs = [await console.client.enqueue("echo", {"n": n}) for n in range(3)]
        await console.rows(
            "UPDATE jobs SET run_at = herald_now() - interval '5 minutes' RETURNING 1"
        )
        await _sample_at(console, "-1 second")  # three due, the oldest for 5 minutes
        await console.rows(
            "UPDATE jobs SET state = 'running', attempt = 1, fence = 1, lease_owner = 'w', "
            "attempted_at = herald_now(), lease_expires_at = herald_now() + interval '1 minute' "
            "WHERE id = %s RETURNING 1",
            jobs[0].id,
        )
        await _sample_at(console, "0")

        page = (await http.get("/ui/")).text
        assert "at most 3 jobs due at once, 2 now" in _description(page, "dp-1")
        assert "at most 1 jobs running at once, 1 now" in _description(page, "rn-1")
        assert "the oldest due job waited at most 5 min" in _description(page, "ag-1")
        assert "sampled every 30 s, the most per minute" in _description(page, "dp-1")
        # One bar of each (both busy samples fall in the last minute); the idle sample
        # 40 minutes ago is a sampled zero, drawn as no bar.
        assert _chart(page, "dp-1").count('class="bar"') == 1
        assert _chart(page, "rn-1").count('class="bar"') == 1
        live = await http.get("/ui/", headers={"X-Herald-Fragment": "overview"})
        assert "at most 3 jobs due at once" in live.text
        wide = (await http.get("/ui/?window=24h")).text
        assert "the most per 20 minutes" in _description(wide, "dp-1")


async def test_a_housekeeper_takes_the_samples(settings: Settings) -> None:
    keeper = await Housekeeper.open(APP, settings, holder="solo")
    try:
        (duty,) = [d for d in keeper.duties if d.name == queue_samples.DUTY]
        assert duty.every == queue_samples.SAMPLE_EVERY
        assert not await keeper.run_due(duty)  # not held yet: not run
        assert queue_samples.DUTY in await keeper.hold_once()
        assert await keeper.run_due(duty)
        async with await open_connection(settings) as conn:
            cur = await conn.execute("SELECT count(*) AS n FROM queue_samples")
            assert await cur.fetchone() == {"n": 1}
    finally:
        await keeper.close()


async def test_a_process_taking_the_duty_keeps_the_deployments_cadence(settings: Settings) -> None:
    cadence = queue_samples.Cadence(every=30.0)
    async with await open_connection(settings) as conn:
        first = await cadence.due_in(conn)  # no sample yet: one period after the first look
        assert 29.0 < first <= 30.0
        await conn.execute(b"SET herald.clock_offset = '-10 seconds'")
        await queue_samples.sample_queues(conn)  # taken 10 s ago by another holder
        await conn.execute(b"RESET herald.clock_offset")
        assert 19.0 < await queue_samples.Cadence(every=30.0).due_in(conn) <= 20.0
        await conn.execute(b"SET herald.clock_offset = '25 seconds'")
        assert await queue_samples.Cadence(every=30.0).due_in(conn) == 0.0  # 35 s old: due


async def test_the_period_stretches_so_sampling_takes_a_bounded_share_of_the_time(
    settings: Settings,
) -> None:
    cadence = queue_samples.Cadence(every=30.0, budget=0.01)
    async with await open_connection(settings) as conn:
        took = await cadence.sample(conn)
        assert cadence.period == max(30.0, took / 0.01)
        costly = queue_samples.Cadence(every=30.0, budget=1e-9)  # as if far dearer
        took = await costly.sample(conn)
        assert costly.period == took / 1e-9 > 30.0
        assert await costly.due_in(conn) > 30.0  # the next pass waits the longer period


async def test_a_housekeeper_does_not_sample_the_moment_it_takes_the_duty(
    settings: Settings,
) -> None:
    keeper = await Housekeeper.open(APP, settings, holder="starting")
    keeper.sampling = queue_samples.Cadence(every=1.5)
    stopping = asyncio.Event()
    running = asyncio.create_task(keeper.run(stopping))
    try:

        async def taken() -> int:
            async with await open_connection(settings) as conn:
                cur = await conn.execute("SELECT count(*) AS n FROM queue_samples")
                row = await cur.fetchone()
            return int(row["n"]) if row else 0

        async def holding() -> bool:
            return queue_samples.DUTY in keeper.held

        await eventually(holding, what="the duty taken")
        await asyncio.sleep(0.5)  # a pass at once would be in by now; the first is due at 1.5 s
        assert await taken() == 0
        assert await eventually(taken, what="the first sample", within=10) == 1
    finally:
        stopping.set()
        await running
        await keeper.close()
