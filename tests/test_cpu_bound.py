"""CPU-bound handlers: a plain def handler computes on the thread pool while the
worker's heartbeats go on; an async one that never awaits blocks the loop, and the
worker says so."""

from __future__ import annotations

import pytest

from herald import Client, Settings
from tests.support import running_worker, wait_for_job

pytestmark = pytest.mark.slow


async def test_a_sync_handler_computing_past_its_lease_keeps_its_lease(
    settings: Settings, client: Client
) -> None:
    short = settings.with_(lease=2.0, heartbeat=0.4, rescue_interval=0.3)
    job = await client.enqueue("crunch", {"seconds": 2 * short.lease})
    async with running_worker(short) as worker:
        done = await wait_for_job(client, job.id, limit=60)
    # One claim, never rescued, never fenced: its heartbeats went on beside it.
    assert (done["state"], done["attempt"], done["fence"], done["rescues"]) == (
        "succeeded",
        1,
        1,
        0,
    )
    assert worker.stats.self_fenced == 0
    assert worker.stats.loop_blocked == 0


async def test_an_async_handler_blocking_the_loop_is_reported(
    settings: Settings, client: Client
) -> None:
    short = settings.with_(lease=2.0, heartbeat=0.4)
    job = await client.enqueue("hog", {"seconds": 1.0})  # twice the lease / 4 threshold
    async with running_worker(short) as worker:
        await wait_for_job(client, job.id, limit=60)
    assert worker.stats.loop_blocked >= 1
    assert worker.loopwatch.longest >= 0.9
