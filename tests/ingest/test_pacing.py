"""Ingestion yields to searches: the pacer's duty cycle, the search-activity probe against
a real PostgreSQL, the pause hooks of fetch and processing, the lowered CPU priority."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from herald.config import ConfigError, Settings
from herald.db import connect, conninfo
from herald.ingest.fetch import fetch_snapshot
from herald.ingest.jobs import IngestConfig
from herald.ingest.pacing import Pacer, PacingConfig, searches_running
from herald.ingest.processing import drain_run
from herald.ingest.sandbox import Sandbox, SnapshotSpec, expected_snapshot
from tests.eventually import eventually
from tests.ingest.harness import add_provider, open_conn, stage_snapshot
from tests.ingest.test_fetch import Collector, policy


class Clock:
    """A clock the test moves, and a sleep that moves it (and records the pause)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def _pacer(
    duty: float, answers: list[bool], clock: Clock, probe_every: float = 0.5, max_pause: float = 2
) -> Pacer:
    asked: list[bool] = list(answers)

    async def probe() -> bool:
        return asked.pop(0)

    config = PacingConfig(duty_cycle=duty, probe_every=probe_every, max_pause=max_pause)
    return Pacer(config, probe, clock=clock, sleep=clock.sleep)


async def test_while_searches_run_the_pacer_rests_so_work_is_its_duty_of_the_time() -> None:
    clock = Clock()
    pacer = _pacer(0.25, [True], clock)
    clock.now += 0.1  # a batch of 100 ms
    await pacer.breathe()
    clock.now += 0.2  # one of 200 ms (the answer is reused within probe_every)
    await pacer.breathe()
    assert clock.pauses == pytest.approx([0.3, 0.6])
    assert pacer.paused == pytest.approx(0.9) and pacer.pauses == 2


async def test_with_no_search_running_the_pacer_never_rests() -> None:
    clock = Clock()
    pacer = _pacer(0.5, [False, False], clock, probe_every=0.5)
    for _ in range(2):
        clock.now += 0.4
        await pacer.breathe()
    assert clock.pauses == [] and pacer.paused == 0


async def test_the_answer_is_asked_again_after_probe_every_and_a_pause_is_bounded() -> None:
    clock = Clock()
    pacer = _pacer(0.5, [False, True], clock, probe_every=1.0, max_pause=0.5)
    clock.now += 0.6
    await pacer.breathe()  # asked: no search
    clock.now += 0.6
    await pacer.breathe()  # 0.6 s after that answer: it still holds
    clock.now += 0.6
    await pacer.breathe()  # 1.2 s after it: asked again, searches run
    assert clock.pauses == [0.5]  # 0.6 s at duty 0.5, capped


async def test_duty_one_never_asks_and_never_rests() -> None:
    clock = Clock()
    pacer = _pacer(1.0, [], clock)  # an empty answer list: asking would fail
    clock.now += 1.0
    await pacer.breathe()
    assert clock.pauses == []


def test_pacing_settings_come_from_the_environment_and_are_checked() -> None:
    config = IngestConfig.from_env({"HERALD_INGEST_DUTY_CYCLE": "0.3", "HERALD_INGEST_NICE": "5"})
    assert (config.pacing.duty_cycle, config.pacing.nice) == (0.3, 5)
    assert IngestConfig.from_env({}).pacing == PacingConfig()
    for env in (
        {"HERALD_INGEST_DUTY_CYCLE": "0"},
        {"HERALD_INGEST_DUTY_CYCLE": "1.5"},
        {"HERALD_INGEST_DUTY_CYCLE": "half"},
        {"HERALD_INGEST_NICE": "20"},
        {"HERALD_INGEST_NICE": "-1"},
        {"HERALD_INGEST_NICE": "2.5"},
    ):
        with pytest.raises(ConfigError, match="HERALD_INGEST_"):
            PacingConfig.from_env(env)


async def test_the_probe_sees_a_search_session_that_just_ran_and_forgets_it_after(
    settings: Settings,
) -> None:
    # A name of this test's own: searches of other runs on a shared server do not count.
    name = f"herald-search-test-{uuid.uuid4().hex[:8]}"
    assert settings.database_url is not None
    async with await open_conn(settings) as conn:
        assert not await searches_running(conn, 0.5, name)
        async with await connect(conninfo(settings.database_url, settings.schema, name)) as s:
            await s.execute("SELECT 1")
            assert await searches_running(conn, 0.5, name)

            async def forgotten() -> bool | None:
                return True if not await searches_running(conn, 0.5, name) else None

            await eventually(forgotten, what="an idle search session to stop counting")


async def test_processing_rests_between_batches_while_searching_and_every_row_is_done_once(
    settings: Settings,
) -> None:
    spec = SnapshotSpec(seed=5, plans=300)
    async with await open_conn(settings) as conn:
        await add_provider(conn, "acme", "http://127.0.0.1:9/feeds/acme")
        run_id = await stage_snapshot(conn, "acme", spec, 1)

        async def searching() -> bool:
            return True

        pacer = Pacer(PacingConfig(duty_cycle=0.5), searching)
        stats = await drain_run(conn, run_id, "w", batch=100, pace=pacer.breathe)
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'done' AND attempts = 1) AS once, "
            "count(*) AS n FROM ingest_staged WHERE run_id = %s",
            (run_id,),
        )
        row = await cur.fetchone()
    assert row is not None and row["once"] == row["n"] == stats.done > 0
    assert stats.processed_run is not None
    assert pacer.pauses == stats.batches >= 3 and pacer.paused > 0


async def test_a_fetch_is_paced_once_before_each_batch_goes_to_the_sink() -> None:
    sink = Collector()
    paces = 0
    delivered_before: list[int] = []

    async def pace() -> None:
        nonlocal paces
        paces += 1
        delivered_before.append(len(sink.batches))

    async with Sandbox() as sandbox:
        await fetch_snapshot(
            sandbox.feed_url("p", plans=250, seed=3), "event-plans", sink, policy=policy(),
            pace=pace,
        )  # fmt: skip
    assert sink.identities == sorted(expected_snapshot(SnapshotSpec(seed=3, plans=250), 1))
    assert paces == len(sink.batches) > 1
    # No write in flight while it rests: the previous batch was delivered already.
    assert delivered_before == list(range(len(sink.batches)))


def _niceness_after(code: str) -> int:
    """The niceness a fresh interpreter ends with after running ``code`` (not this one's)."""
    out = subprocess.run(
        [sys.executable, "-c", f"import os\n{code}\nprint(os.nice(0))"],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ.copy(),
    )
    return int(out.stdout.strip().splitlines()[-1])


def test_an_ingestion_process_lowers_its_priority_but_not_one_serving_search() -> None:
    base = os.nice(0)
    lower = "from herald.ingest.pacing import lower_priority\nlower_priority({})"
    assert _niceness_after(lower.format(min(19, base + 5))) == min(19, base + 5)
    assert _niceness_after(lower.format(0)) == base  # never raises the priority
    served = "from herald.ingest.pacing import serves_search\nserves_search()\n"
    assert _niceness_after(served + lower.format(min(19, base + 5))) == base
