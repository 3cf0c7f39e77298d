"""Backoff: the default schedule, its jitter bounds and its cap, and the delay a worker
actually writes into a retried job's run_at."""

from __future__ import annotations

import random

import pytest

from herald import Backoff, Client, Retry, Settings, Snooze
from herald.errors import MAX_DELAY
from tests.support import running_worker, wait_for_job


def test_default_schedule_is_about_1_5_25_125_seconds() -> None:
    backoff = Backoff()
    assert [backoff.nominal(n) for n in (1, 2, 3, 4)] == [1.0, 5.0, 25.0, 125.0]


@pytest.mark.parametrize("retry", [1, 2, 3, 4, 5, 8, 20, 500])
def test_delays_stay_within_jitter_bounds(retry: int) -> None:
    backoff = Backoff()
    low, high = backoff.bounds(retry)
    nominal = backoff.nominal(retry)
    assert low == pytest.approx(nominal * 0.8)
    assert high == pytest.approx(nominal * 1.2)
    rng = random.Random(retry)
    delays = [backoff.delay(retry, rng) for _ in range(2000)]
    assert all(low <= d <= high for d in delays)
    # Jitter really spreads retries: not all in lock step, and across most of the band.
    assert max(delays) - min(delays) > 0.8 * (high - low)


def test_delays_are_capped() -> None:
    backoff = Backoff(base=1.0, factor=5.0, cap=60.0, jitter=0.1)
    assert backoff.nominal(4) == 60.0  # 125 s nominal, capped
    assert backoff.nominal(10_000) == 60.0  # no float overflow for absurd counts
    rng = random.Random(7)
    assert all(backoff.delay(n, rng) <= 66.0 for n in range(1, 200))
    # The default cap holds too.
    assert Backoff().nominal(30) == Backoff().cap


def test_zero_jitter_is_exact() -> None:
    backoff = Backoff(base=2.0, factor=3.0, cap=100.0, jitter=0.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4, 5)] == [2.0, 6.0, 18.0, 54.0, 100.0]


@pytest.mark.parametrize(
    "kwargs",
    [{"base": -1.0}, {"factor": 0.5}, {"cap": -1.0}, {"jitter": 1.0}, {"jitter": -0.1}],
)
def test_nonsense_backoff_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        Backoff(**kwargs)


def test_delays_the_database_cannot_represent_are_refused() -> None:
    with pytest.raises(ValueError, match="backoff cap"):
        Backoff(cap=1e300)
    for bad in (float("inf"), float("nan"), -1.0, MAX_DELAY * 2):
        with pytest.raises(ValueError, match="retry delay must be between"):
            Retry("later", delay=bad)
        with pytest.raises(ValueError, match="snooze must be between"):
            Snooze(bad)
    assert Retry("later", delay=MAX_DELAY).delay == MAX_DELAY
    assert Snooze(0).seconds == 0.0


async def test_worker_schedules_the_retry_within_the_kinds_bounds(
    settings: Settings, client: Client
) -> None:
    """A failed attempt is put back with run_at = failure time + a jittered delay."""
    job = await client.enqueue("slow_retry")
    async with running_worker(settings):
        row = await wait_for_job(client, job.id, lambda r: r["attempt"] == 1 and r["errors"])
    assert row["state"] == "waiting"
    failed_at = row["errors"][-1]["at"]
    async with client.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT extract(epoch FROM run_at - %s::timestamptz)::float8 AS delay FROM jobs "
            "WHERE id = %s",
            (failed_at, job.id),
        )
        found = await cur.fetchone()
    assert found is not None
    # Kind slow_retry: base 100 s, jitter 0.2 -> 80..120 s after the failure (the
    # failure timestamp and run_at come from the same statement's clock).
    assert 80.0 <= found["delay"] <= 120.0
