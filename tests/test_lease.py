"""The lease protocol: self-fencing by the worker's own clock, deadlines, silent links.

The silent-link tests put a TCP proxy (tests/silent_link.py) between a worker and the real
PostgreSQL and cut it without closing anything, the way a pulled cable or a dead NAT
entry does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from faults.silent_link import SilentLink

from herald import Client, Settings
from herald.config import ConfigError
from herald.db import conninfo, make_pool
from herald.lease import Lease, StatementDeadline, WorkerStats, bounded
from herald.maintenance import Maintenance
from herald.worker import Worker
from tests.support import APP, TICKS, wait_for_job


def _row(job_id: int, fence: int = 1) -> dict[str, object]:
    return {"id": job_id, "fence": fence, "suspect": False}


async def test_a_handler_whose_lease_went_unconfirmed_for_r_self_is_cancelled() -> None:
    settings = Settings(lease=5.0, heartbeat=1.0)
    assert settings.self_fence_after == 4.0
    lease = Lease("me", settings, WorkerStats())
    now = time.monotonic()
    stale = lease.hold(_row(1), confirmed=now - 4.5)
    fresh = lease.hold(_row(2), confirmed=now - 1.0)
    stale.task = asyncio.create_task(asyncio.sleep(60))
    fresh.task = asyncio.create_task(asyncio.sleep(60))
    try:
        assert lease.fence_unconfirmed(now) == 1
        await asyncio.sleep(0)
        assert stale.lost.is_set() and stale.task.cancelled()
        assert not fresh.lost.is_set() and not fresh.task.done()
        assert lease.stats.self_fenced == 1
        # Its outcome is not recorded; the job leaves the heartbeat's set.
        lease.handler_done(stale, None)
        assert list(lease.jobs) == [2]
    finally:
        fresh.task.cancel()


async def test_a_statement_past_its_deadline_is_abandoned_not_awaited() -> None:
    began = time.monotonic()
    with pytest.raises(StatementDeadline):
        await bounded(asyncio.sleep(30), 0.05)
    assert time.monotonic() - began < 1.0
    assert await bounded(asyncio.sleep(0, "answer"), 1.0) == "answer"


def test_the_heartbeat_must_fit_inside_r_self() -> None:
    with pytest.raises(ConfigError, match="self-fencing"):
        Settings(lease=10.0, heartbeat=8.5)
    Settings(lease=10.0, heartbeat=7.5)


def test_connections_detect_dead_links_in_seconds(settings: Settings) -> None:
    assert settings.database_url is not None
    info = conninfo(settings.database_url, settings.schema, settings=settings, engine=True)
    for part in ("keepalives_idle=5", "tcp_user_timeout=10000", "connect_timeout=5"):
        assert part in info
    assert "statement_timeout=10000" in info
    own = conninfo(settings.database_url + "?connect_timeout=2", settings.schema)
    assert "connect_timeout=2" in own and "connect_timeout=5" not in own


@pytest.fixture
async def link(settings: Settings) -> AsyncIterator[SilentLink]:
    assert settings.database_url is not None
    proxy = await SilentLink(settings.database_url).start()
    try:
        yield proxy
    finally:
        proxy.restore()
        await proxy.close()


def _through(settings: Settings, link: SilentLink) -> Settings:
    return settings.with_(
        database_url=link.url,
        lease=3.0,
        heartbeat=0.5,
        statement_timeout=1.0,
        poll_interval=0.3,
        shutdown_grace=3.0,
    )


async def _server_expiry(client: Client, job_id: int) -> float:
    row = await client.get_job(job_id)
    assert row is not None
    assert row.lease_expires_at is not None
    return row.lease_expires_at.timestamp()


@pytest.mark.slow
async def test_a_cut_off_worker_stops_its_handler_before_its_lease_ends_and_comes_back(
    settings: Settings, client: Client, link: SilentLink
) -> None:
    proxied = _through(settings, link)
    worker = Worker(APP, settings=proxied, maintenance=False)
    running = asyncio.create_task(worker.run())
    try:
        job = await client.enqueue("ticker", {"seconds": 60})
        await wait_for_job(client, job.id, lambda r: r["state"] == "running")
        await asyncio.sleep(0.3)  # a few calls made under a confirmed lease
        assert any(j == job.id for j, _, _ in TICKS)
        link.cut()
        cut_at = time.time()
        await asyncio.sleep(0.6)  # a heartbeat that was in flight lands (or not) by now
        expiry = await _server_expiry(client, job.id)  # the cut-off worker moves it no more
        # The handler is cancelled by the worker's own clock: within R_self of the last
        # confirmation, so before the server's expiry, with the margin to spare.
        await asyncio.sleep(proxied.lease + 0.5)
        calls = [t for j, f, t in TICKS if j == job.id and f == 1]
        last_call = max(calls)
        assert worker.stats.self_fenced == 1
        assert last_call < expiry - proxied.self_fence_margin / 2, (last_call, expiry)
        assert last_call - cut_at <= proxied.self_fence_after + 0.5
        print(f"stale calls stopped {expiry - last_call:.2f}s before the lease expiry")

        # The lease runs out on the server; the rescuer (on a direct connection) hands
        # the job back; nothing the stale attempt did comes after that.
        assert settings.database_url is not None
        direct = make_pool(conninfo(settings.database_url, settings.schema), 1)
        await direct.open(wait=True)
        try:
            assert await Maintenance(APP, settings, direct).rescue_once() == 1
        finally:
            await direct.close()
        rescued_at = time.time()
        assert all(t < rescued_at for j, f, t in TICKS if j == job.id and f == 1)

        # The link returns: the worker reconnects and claims the job again promptly.
        link.restore()
        restored_at = time.monotonic()
        again = await wait_for_job(client, job.id, lambda r: r["fence"] == 2, limit=30)
        reconnect = time.monotonic() - restored_at
        print(f"claimed again {reconnect:.2f}s after the link returned")
        assert again["state"] == "running"
        assert reconnect < 5.0
    finally:
        link.restore()
        worker.stop()
        worker.stop()
        await asyncio.wait_for(running, 30)


@pytest.mark.slow
async def test_a_worker_on_a_silent_link_still_stops_within_its_grace(
    settings: Settings, client: Client, link: SilentLink
) -> None:
    proxied = _through(settings, link)
    worker = Worker(APP, settings=proxied, maintenance=False)
    running = asyncio.create_task(worker.run())
    job = await client.enqueue("ticker", {"seconds": 60})
    await wait_for_job(client, job.id, lambda r: r["state"] == "running")
    link.cut()
    await asyncio.sleep(0.2)
    began = time.monotonic()
    worker.stop()
    await asyncio.wait_for(running, proxied.shutdown_grace + 2.0)
    took = time.monotonic() - began
    print(f"stopped in {took:.2f}s (grace {proxied.shutdown_grace:g}s)")
    assert took <= proxied.shutdown_grace + 0.5
