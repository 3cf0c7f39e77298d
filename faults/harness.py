"""One fault run's world: its own PostgreSQL, the HTTP sink, supervised workers, a load.

A scenario drives a :class:`Harness`: start workers, feed jobs, inject faults, drain,
then :meth:`Harness.observe` hands the checker everything the database and sink hold.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from faults.app import APP
from faults.checker import Observations
from faults.pg import EmbeddedServer
from faults.queries import query
from faults.sink import Sink
from faults.supervisor import Event, Supervisor
from herald import Client, JobSpec, Settings
from herald.db import AsyncConn, connect, conninfo
from herald.migrate import migrate

SCHEMA = "faults"


@dataclass(frozen=True)
class Timing:
    """Lease settings of the workers; R = lease + rescue interval + poll interval + 2 s."""

    lease: float
    heartbeat: float
    rescue: float
    poll: float

    @property
    def recovery_bound(self) -> float:
        return self.lease + self.rescue + self.poll + 2.0


FULL_TIMING = Timing(lease=10.0, heartbeat=2.0, rescue=1.0, poll=1.0)
SHORT_TIMING = Timing(lease=4.0, heartbeat=1.0, rescue=1.0, poll=1.0)


@dataclass(frozen=True)
class Durations:
    """Handler durations: lognormal with the given median and 99th percentile, capped."""

    median: float = 0.2
    p99: float = 3.0
    cap: float = 8.0

    def draw(self, rng: random.Random) -> float:
        sigma = math.log(self.p99 / self.median) / 2.3263  # z of the 99th percentile
        return min(self.cap, rng.lognormvariate(math.log(self.median), sigma))

    def scaled(self, factor: float) -> Durations:
        return Durations(self.median * factor, self.p99 * factor, self.cap * factor)


@dataclass(frozen=True)
class Plan:
    jobs: int
    workers: int
    concurrency: int
    window: float  # seconds of load and faults before the drain
    durations: Durations
    kill_every: float = 2.0
    hold: float = 0.0  # how long a pause / a rogue lock lasts
    drain: float = 60.0  # the drain bound


@dataclass
class Harness:
    workdir: Path
    timing: Timing
    seed: int
    workers: int
    concurrency: int
    notify: bool = True
    shutdown_grace: float = 20.0
    events: list[Event] = field(default_factory=list)
    accepted: set[int] = field(default_factory=set)
    cancelled: dict[int, float] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.started = time.time()
        self.server: EmbeddedServer | None = None
        self.sink = Sink()
        self._client: Client | None = None
        self._supervisor: Supervisor | None = None
        self._watch: asyncio.Task[None] | None = None
        self._others: list[Supervisor] = []
        self._tasks: list[asyncio.Task[None]] = []

    # --- set-up and tear-down ----------------------------------------------------------

    async def open(self) -> Harness:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.server = await asyncio.to_thread(EmbeddedServer)
        async with await self.connect() as conn:
            await migrate(conn, SCHEMA)
            await conn.execute(query("create_executions"))
            await conn.execute(query("create_effects"))
            for name in ("create_claims", "create_claims_function", "create_claims_trigger"):
                await conn.execute(query(name))
        self.sink.start()
        self._client = await Client.open(APP, self.settings)
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        self._supervisor = Supervisor(
            self.worker_env(), self.workers, self.concurrency, logs, self.events
        )
        self.started = time.time()
        self._tasks.append(asyncio.create_task(self._probe_load()))
        return self

    async def _probe_load(self, tick: float = 0.1) -> None:
        """How late this process's own timers fire: the machine's CPU starvation, which
        delays the workers' polls alike (latency bounds are widened by the worst lag)."""
        loop = asyncio.get_running_loop()
        self.notes["max_lag"] = 0.0
        while True:
            before = loop.time()
            await asyncio.sleep(tick)
            lag = loop.time() - before - tick
            self.notes["max_lag"] = max(float(self.notes["max_lag"]), lag)

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        for task in self._tasks:
            task.cancel()
        for other in self._others:
            await asyncio.to_thread(other.stop)
        if self._supervisor is not None:
            await asyncio.to_thread(self._supervisor.stop)
        if self._client is not None:
            await self._client.close()
        self.sink.stop()
        if self.server is not None:
            if not self.server.running:
                await asyncio.to_thread(self.server.start)
            await asyncio.to_thread(self.server.stop)

    @property
    def url(self) -> str:
        if self.server is None:
            raise RuntimeError("the harness is not open")
        return self.server.url

    @property
    def settings(self) -> Settings:
        t = self.timing
        return Settings(
            database_url=self.url,
            schema=SCHEMA,
            lease=t.lease,
            heartbeat=t.heartbeat,
            rescue_interval=t.rescue,
            poll_interval=t.poll,
            notify=self.notify,
        )

    def worker_env(self) -> dict[str, str]:
        t = self.timing
        return {
            "HERALD_DATABASE_URL": self.url,
            "HERALD_SCHEMA": SCHEMA,
            "HERALD_LEASE": str(t.lease),
            "HERALD_HEARTBEAT": str(t.heartbeat),
            "HERALD_RESCUE_INTERVAL": str(t.rescue),
            "HERALD_POLL_INTERVAL": str(t.poll),
            "HERALD_NOTIFY": "1" if self.notify else "0",
            "HERALD_SHUTDOWN_GRACE": str(self.shutdown_grace),
            "FAULTS_SINK_URL": self.sink.url,
        }

    async def connect(self) -> AsyncConn:
        return await connect(conninfo(self.url, SCHEMA, "faults-harness"))

    @property
    def supervisor(self) -> Supervisor:
        if self._supervisor is None:
            raise RuntimeError("the harness is not open")
        return self._supervisor

    def start_workers(self) -> None:
        self.supervisor.start()
        self._watch = asyncio.create_task(self.supervisor.watch())

    def start_schedulers(self, count: int) -> Supervisor:
        """Scheduler processes under their own supervisor (restarted when killed)."""
        schedulers = Supervisor(
            self.worker_env(), count, 1, self.workdir / "logs", self.events, role="scheduler"
        )
        schedulers.start()
        self._others.append(schedulers)
        self._tasks.append(asyncio.create_task(schedulers.watch()))
        return schedulers

    def event(self, action: str, pid: int | None = None, detail: str = "") -> None:
        self.events.append(Event(time.time(), action, pid, detail))

    # --- load --------------------------------------------------------------------------

    def jobs(
        self,
        count: int,
        durations: Durations,
        kind: str = "publish",
        pipeline_share: float = 0.2,
    ) -> list[JobSpec]:
        """``count`` seeded jobs; a share of the publishing ones run as pipelines."""
        specs = []
        for n in range(count):
            ms = round(durations.draw(self.rng) * 1000)
            this = kind
            if kind == "publish" and self.rng.random() < pipeline_share:
                this = "publish_pipeline"
            doc = {"title": f"document {n}", "words": self.rng.randrange(100, 5000)}
            specs.append(JobSpec(this, {"n": n, "ms": ms, "doc": _json(doc)}))
        return specs

    async def enqueue(self, specs: list[JobSpec]) -> list[int]:
        """Admit a batch, retrying through a database outage; accepted once it returns."""
        client = self._client
        if client is None:
            raise RuntimeError("the harness is not open")
        while True:
            try:
                admitted = await client.enqueue_many(specs)
            except (psycopg.OperationalError, OSError):
                await asyncio.sleep(0.3)
                continue
            ids = [a.id for a in admitted]
            self.accepted.update(ids)
            return ids

    async def feed(self, specs: list[JobSpec], over: float, tick: float = 0.25) -> None:
        """Admit ``specs`` at a steady rate spread over ``over`` seconds."""
        batches = max(1, int(over / tick))
        size = math.ceil(len(specs) / batches)
        begin = time.monotonic()
        for i in range(0, len(specs), size):
            await self.enqueue(specs[i : i + size])
            target = begin + (i // size + 1) * tick
            await asyncio.sleep(max(0.0, target - time.monotonic()))

    # --- faults ------------------------------------------------------------------------

    async def _pids(self, name: str) -> set[int]:
        pids = [s.pid for s in self.supervisor.slots]
        try:
            async with await self.connect() as conn:
                cur = await conn.execute(query(name), {"pids": pids})
                return {int(r["pid"]) for r in await cur.fetchall()}
        except psycopg.OperationalError:
            return set()

    async def held_by(self, pid: int) -> list[int]:
        """The jobs still running under a lease the worker process ``pid`` took."""
        async with await self.connect() as conn:
            cur = await conn.execute(query("held_by_pid"), {"pid": pid})
            return [int(r["id"]) for r in await cur.fetchall()]

    async def warm(self, patience: float = 60.0) -> None:
        """Wait until every worker has run a job: faults start on a working system."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            working = await self._pids("working_pids")
            if all(s.pid in working for s in self.supervisor.slots):
                break
            await asyncio.sleep(0.2)
        self.event("warm")
        self.notes["warm"] = time.time()

    async def pick_worker(self, holding: bool = False) -> int:
        """A slot picked at random among workers that are up and running jobs.

        A worker still booting holds nothing; killing it would test little. With
        ``holding``, prefer (waiting a little for) workers that hold a running job now.
        """
        slots = self.supervisor.slots
        candidates: set[int] = set()
        if holding:
            deadline = time.monotonic() + 5.0
            while not candidates and time.monotonic() < deadline:
                candidates = await self._pids("holding_pids")
                if not candidates:
                    await asyncio.sleep(0.1)
        candidates = candidates or await self._pids("working_pids")
        chosen = [s.index for s in slots if s.pid in candidates] or [s.index for s in slots]
        return self.rng.choice(sorted(chosen))

    async def wait_holding(self, slot: int, within: float) -> bool:
        """Wait until the worker in ``slot`` holds a running job (False after ``within``)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.supervisor.slots[slot].pid in await self._pids("holding_pids"):
                return True
            await asyncio.sleep(0.05)
        return False

    async def kill_storm(
        self, duration: float, every: float, victims: Supervisor | None = None
    ) -> None:
        """SIGKILL one working worker (or one of ``victims``) at random every ``every`` s.

        Workers holding a running job are preferred: a kill that catches a worker between
        jobs proves nothing about recovery (and short runs could then see no rescue).
        """
        end = time.monotonic() + duration
        while time.monotonic() + every <= end:
            await asyncio.sleep(every)
            if victims is None:
                self.supervisor.kill(await self.pick_worker(holding=True))
            else:
                victims.kill(self.rng.randrange(len(victims.slots)))

    async def crash_postgres(self, down: float) -> None:
        """Immediate stop (a crash), ``down`` seconds of outage, then a restart."""
        server = self.server
        if server is None:
            raise RuntimeError("the harness is not open")
        await asyncio.to_thread(server.crash)
        self.event("pg_crash")
        await asyncio.sleep(down)
        await asyncio.to_thread(server.start)
        self.event("pg_start")

    # --- the end -----------------------------------------------------------------------

    async def progress(self) -> tuple[int, int]:
        async with await self.connect() as conn:
            cur = await conn.execute(query("progress"))
            row = await cur.fetchone()
        return (int(row["done"]), int(row["total"])) if row else (0, 0)

    async def drain(self, bound: float) -> float:
        """Faults have stopped: wait until every job is terminal or ``bound`` passes."""
        begin = time.monotonic()
        self.event("drain")
        while time.monotonic() - begin < bound:
            try:
                done, total = await self.progress()
            except psycopg.OperationalError:
                done, total = -1, 0
            if total and done == total and total >= len(self.accepted):
                break
            await asyncio.sleep(0.25)
        self.event("drained")
        return time.monotonic() - begin

    async def observe(self) -> Observations:
        async with await self.connect() as conn:

            async def rows(name: str) -> list[dict[str, Any]]:
                cur = await conn.execute(query(name))
                return await cur.fetchall()

            jobs = await rows("final_jobs")
            executions = await rows("final_executions")
            effects = await rows("final_effects")
            rescues = await rows("final_rescues")
            stale = {r["operation"]: int(r["n"]) for r in await rows("final_stale_writes")}
            dead = await rows("final_dead_letters")
            claims = await rows("final_claims")
        deliveries, applied = self.sink.snapshot()
        return Observations(
            accepted=set(self.accepted),
            jobs=jobs,
            executions=executions,
            effects=effects,
            rescues=rescues,
            stale_writes=stale,
            dead_letters=dead,
            deliveries=deliveries,
            applied=applied,
            events=list(self.events),
            cancelled=dict(self.cancelled),
            claims=claims,
            sink_log=self.sink.log(),
        )


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
