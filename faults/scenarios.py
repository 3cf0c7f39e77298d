"""The named, seeded fault scenarios, each in a short (CI) and a full version.

A scenario body drives the harness (workers, load, faults); the common runner then
drains, observes and checks. ``verify`` adds the scenario's own invariants, including
proof that the fault actually bit (a kill storm that orphaned nothing proves nothing).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from faults import expectations as expect
from faults.app import APP
from faults.checker import Findings, Observations, check
from faults.harness import FULL_TIMING, SHORT_TIMING, Durations, Harness, Plan, Timing
from faults.queries import query
from faults.silent_link import SilentLink
from herald.ops.errors import Conflict
from herald.ops.jobs import cancel
from herald.schedules import ScheduleSpec, create_schedule

BASE = Durations(median=0.2, p99=3.0, cap=8.0)
POISON_ATTEMPTS = 3


Body = Callable[[Harness, Plan], Awaitable[None]]
Verify = Callable[[Harness, Observations, Findings, Plan], list[str]]


@dataclass(frozen=True)
class Scenario:
    number: int
    name: str
    title: str
    seed: int
    short: Plan
    full: Plan
    body: Body
    verify: Verify | None = None
    notify: bool = True
    grace: float = 20.0


@dataclass
class Result:
    number: int
    name: str
    title: str
    seed: int
    version: str
    started: str
    seconds: float
    timing: dict[str, float]
    plan: dict[str, Any]
    metrics: dict[str, Any]
    violations: list[str]
    orphans: list[tuple[float, int, float]] = field(repr=False)
    throughput: list[tuple[float, int]] = field(repr=False)

    @property
    def ok(self) -> bool:
        return not self.violations


# --- bodies ------------------------------------------------------------------------------


async def _warm(h: Harness, p: Plan, kind: str = "publish") -> None:
    """Start the workers and feed a trickle of short jobs until every worker works."""
    warmup = h.jobs(240, p.durations.scaled(0.2), kind=kind)  # 4 a second, at most 60 s
    h.start_workers()
    trickle = asyncio.create_task(h.feed(warmup, over=60.0))
    await h.warm()
    trickle.cancel()
    await asyncio.gather(trickle, return_exceptions=True)


async def _with_load(h: Harness, p: Plan, faults: Awaitable[None], kind: str = "publish") -> None:
    """Warm the workers up, then run the paced load and the faults together."""
    specs = h.jobs(p.jobs, p.durations, kind=kind)
    await _warm(h, p, kind)
    await asyncio.gather(h.feed(specs, p.window), faults)


async def _kill_storm(h: Harness, p: Plan) -> None:
    await _with_load(h, p, h.kill_storm(p.window, p.kill_every))


async def _kill_storm_and_crashes(h: Harness, p: Plan) -> None:
    async def crashes() -> None:
        for _ in range(2):
            await asyncio.sleep(p.window / 3)
            await h.crash_postgres(down=p.hold)

    async def both() -> None:
        await asyncio.gather(h.kill_storm(p.window, p.kill_every), crashes())

    await _with_load(h, p, both())


# How often the zombie fault picks again when the paused worker turned out to hold nothing.
PAUSE_TRIES = 10


async def _zombie(h: Harness, p: Plan) -> None:
    async def pause_one() -> None:
        # The worker picked as holding a job may finish it between the look and the
        # SIGSTOP (a loaded CI machine once paused a worker that held nothing, and the
        # fault did not bite): confirm it still holds one once paused, else pick again.
        for _ in range(PAUSE_TRIES):
            index = await h.pick_worker(holding=True)
            pid = h.supervisor.pause(index)
            if await h.held_by(pid):
                break
            h.supervisor.resume(index)
            await asyncio.sleep(0.2)
        await asyncio.sleep(p.hold)
        h.supervisor.resume(index)

    await _with_load(h, p, pause_one())


async def _quiet(h: Harness, p: Plan) -> None:
    await _with_load(h, p, asyncio.sleep(0))


async def _failing(h: Harness, p: Plan) -> None:
    await _with_load(h, p, h.kill_storm(p.window, p.kill_every), kind="always_fails")


async def _poison(h: Harness, p: Plan) -> None:
    specs = h.jobs(p.jobs, p.durations, pipeline_share=0.0)
    poison = specs[len(specs) // 3]
    poison.payload = {**poison.payload, "doc": '{"title": "unterminated', "poison": True}
    h.start_workers()
    await h.feed(specs, p.window)


async def _poison_neighbours(h: Harness, p: Plan) -> None:
    """1 % of the jobs crash their worker (os._exit) on every attempt, among healthy ones."""
    specs = h.jobs(p.jobs, p.durations)
    for spec in specs[5::100]:  # past the first few: the workers are up by then
        spec.kind = "publish"
        spec.payload = {**spec.payload, "crash": True, "poison": True}
        # Fewer crash cycles (2 free strikes + 3 charged), each a worker restart: the
        # healthy jobs keep their 5 attempts, which is what the scenario is about.
        spec.max_attempts = POISON_ATTEMPTS
    h.start_workers()
    await h.feed(specs, p.window)


async def _silent_link(h: Harness, p: Plan) -> None:
    """One worker's link to PostgreSQL goes silent (nothing closed) for ``hold`` seconds."""
    link = await SilentLink(h.url).start()
    h.supervisor.slot_env[0] = {"HERALD_DATABASE_URL": link.url}

    async def cut_one() -> None:
        await asyncio.sleep(p.window / 4)
        await h.wait_holding(0, within=p.window)  # the cut must catch worker 0 holding jobs
        link.cut()
        h.event("cut", h.supervisor.slots[0].pid, "worker 0: link silent")
        await asyncio.sleep(p.hold)
        link.restore()
        h.event("restore", h.supervisor.slots[0].pid, "worker 0: link back")
        h.notes["restored"] = time.time()
        h.notes["cut_pid"] = h.supervisor.slots[0].pid
        # Fresh work once the link is back, more than the other workers can hold: on a
        # quiet machine they may have drained the whole load while worker 0 was cut off,
        # and the scenario checks that worker 0 is back at work.
        await h.enqueue(h.jobs(3 * p.workers * p.concurrency, p.durations))

    try:
        await _with_load(h, p, cut_one())
        # Everything finishes before the link closes for good: a job worker 0 held then
        # would be orphaned by the harness, not by the fault.
        await h.drain(p.drain)
    finally:
        h.notes["link_closing"] = True
        await link.close()


async def _cancel_during_rescue(h: Harness, p: Plan) -> None:
    async def kill_and_cancel() -> None:
        end = time.monotonic() + p.window
        while time.monotonic() + p.kill_every <= end:
            await asyncio.sleep(p.kill_every)
            pid = h.supervisor.kill(await h.pick_worker(holding=True))
            held = await h.held_by(pid)
            async with await h.connect() as conn:
                for job_id in held:  # the operator's cancel, as an operator would call it
                    try:
                        await cancel(conn, job_id, actor="faults", reason="worker died")
                    except Conflict:
                        continue  # it finished just before its worker died
                    h.cancelled[job_id] = time.time()
            h.event("cancel", pid, f"{len(held)} held jobs")

    await _with_load(h, p, kill_and_cancel())


async def _rogue_lock(h: Harness, p: Plan) -> None:
    """Lock some waiting rows (due in a moment), then run the load beside them."""
    await _warm(h, p)
    due = datetime.now(UTC) + timedelta(seconds=1)
    targets = h.jobs(max(1, p.jobs // 30), p.durations)
    for spec in targets:
        spec.run_at = due
    ids = await h.enqueue(targets)
    async with await h.connect() as rogue, rogue.transaction():
        cur = await rogue.execute(query("rogue_lock"), {"ids": ids})
        h.notes["locked"] = [r["id"] for r in await cur.fetchall()]
        h.event("lock", None, f"{len(h.notes['locked'])} waiting rows")
        locked_at = time.monotonic()
        await h.feed(h.jobs(p.jobs, p.durations), p.hold / 2)
        await asyncio.sleep(max(0.0, p.hold - (time.monotonic() - locked_at)))
        h.notes["released"] = time.time()  # the commit below releases the rows
    h.event("unlock")


async def _rolling_restart(h: Harness, p: Plan) -> None:
    async def replace_all() -> None:
        for index in range(p.workers):
            await asyncio.sleep(p.window / (p.workers + 1))
            await h.supervisor.replace(index, settle=1.5, grace=h.shutdown_grace)

    await _with_load(h, p, replace_all())


async def _schedules(h: Harness, p: Plan) -> None:
    """Schedules with slots due, fired by schedulers that keep being killed."""
    minutes = 6 if p.jobs < 1000 else 30
    count = max(1, p.jobs // minutes)
    async with await h.connect() as conn:
        for i in range(count):
            spec = h.jobs(1, p.durations, pipeline_share=0.0)[0]
            await create_schedule(
                conn,
                ScheduleSpec(
                    kind="publish",
                    key=f"schedule-{i}",
                    frequency="cron",
                    cron="* * * * *",
                    timezone="UTC",
                    payload=spec.payload,
                    misfire="all",
                    max_catchup=2,  # a few slots per pass: many passes, many interrupted
                ),
                app=APP,
            )
        cur = await conn.execute(query("backdate_schedules"), {"minutes": minutes})
        h.notes["first_slots"] = {r["id"]: r["first_slot"] for r in await cur.fetchall()}
    h.start_workers()
    schedulers = h.start_schedulers(p.workers)
    await h.kill_storm(p.window, p.kill_every, victims=schedulers)
    deadline = time.monotonic() + p.drain
    while time.monotonic() < deadline:  # faults over: let the schedulers catch up
        async with await h.connect() as conn:
            cur = await conn.execute(query("schedules_behind"))
            row = await cur.fetchone()
        if row is not None and row["n"] == 0:
            break
        await asyncio.sleep(0.5)
    async with await h.connect() as conn:
        for name in ("final_schedules", "final_schedule_fires"):
            cur = await conn.execute(query(name))
            h.notes[name] = await cur.fetchall()


# --- the catalogue -----------------------------------------------------------------------

SHORT = BASE.scaled(0.5)
_S = Plan(
    jobs=120, workers=3, concurrency=16, window=12.0, durations=SHORT, kill_every=3.0, drain=40.0
)
_F = Plan(jobs=10_000, workers=4, concurrency=25, window=120.0, durations=BASE, drain=120.0)
LONG = Durations(median=1.0, p99=3.0, cap=4.0)


def _with(plan: Plan, **changes: Any) -> Plan:
    return Plan(**{**plan.__dict__, **changes})


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(1, "kill_storm", "Kill storm", 101, _S, _F, _kill_storm, expect.verify_kills),
        Scenario(
            2,
            "kill_storm_pg_crash",
            "Kill storm + PostgreSQL crashed and restarted twice",
            202,
            _with(_S, hold=2.0),
            _with(_F, hold=5.0),
            _kill_storm_and_crashes,
            expect.verify_crashes,
        ),
        Scenario(
            3,
            "zombie",
            "Zombie: a worker paused longer than its lease",
            303,
            _with(_S, jobs=80, durations=LONG, hold=SHORT_TIMING.lease + 3),
            _with(_F, jobs=2000, durations=LONG.scaled(2), hold=FULL_TIMING.lease + 5),
            _zombie,
            expect.verify_zombie,
        ),
        Scenario(
            4,
            "lost_notifications",
            "Lost notifications (NOTIFY off)",
            404,
            _with(_S, window=8.0),
            _with(_F, jobs=3000, window=60.0),
            _quiet,
            expect.verify_pickup,
            notify=False,
        ),
        Scenario(
            5,
            "deterministic_failures",
            "Deterministic failures under kills",
            505,
            _with(_S, jobs=80),
            _with(_F, jobs=3000),
            _failing,
            expect.verify_failing,
        ),
        Scenario(
            6,
            "poison_payload",
            "Poison payload",
            606,
            _with(_S, jobs=150, window=6.0),
            _with(_F, jobs=2000, window=30.0),
            _poison,
            expect.verify_poison,
        ),
        Scenario(
            7,
            "cancel_during_rescue",
            "Cancel during rescue",
            707,
            _with(_S, jobs=60, durations=LONG, kill_every=3.0),
            _with(_F, jobs=2000, durations=LONG.scaled(2), kill_every=5.0),
            _cancel_during_rescue,
            expect.verify_cancel,
        ),
        Scenario(
            8,
            "rogue_lock",
            "Rogue client holds FOR UPDATE on waiting rows",
            808,
            _with(_S, jobs=100, hold=10.0),
            _with(_F, jobs=2000, hold=60.0),
            _rogue_lock,
            expect.verify_rogue,
        ),
        Scenario(
            9,
            "rolling_restart",
            "Rolling restart (SIGTERM, replace) under load",
            909,
            _with(_S, window=14.0),
            _with(_F, jobs=5000, window=90.0),
            _rolling_restart,
            expect.verify_rolling,
        ),
        Scenario(
            10,
            "schedules_under_kills",
            "Schedules under scheduler kills: each due slot enqueued once",
            1010,
            _with(_S, jobs=120, workers=2, window=12.0, kill_every=2.0, drain=30.0),
            _with(_F, jobs=3000, workers=3, window=120.0, drain=120.0),
            _schedules,
            expect.verify_schedules,
        ),
        Scenario(
            11,
            "poison_neighbours",
            "1 % poison jobs crash their worker: no healthy job pays for them",
            1111,
            _with(_S, jobs=200, drain=120.0),
            _with(_F, jobs=2000, window=60.0, drain=120.0),
            _poison_neighbours,
            expect.verify_poison_neighbours,
        ),
        Scenario(
            12,
            "silent_link",
            "One worker's database link goes silent (blackholed, nothing closed)",
            1212,
            _with(_S, jobs=200, window=20.0, durations=LONG, hold=2 * SHORT_TIMING.lease + 2),
            _with(_F, jobs=3000, window=120.0, durations=LONG.scaled(2), hold=60.0),
            _silent_link,
            expect.verify_silent_link,
        ),
    ]
}


async def run(scenario: Scenario, *, short: bool, workdir: Path, seed: int | None = None) -> Result:
    """Run one scenario end to end: faults, drain, observation, check."""
    plan = scenario.short if short else scenario.full
    timing: Timing = SHORT_TIMING if short else FULL_TIMING
    used_seed = scenario.seed if seed is None else seed
    harness = Harness(
        workdir,
        timing,
        used_seed,
        plan.workers,
        plan.concurrency,
        notify=scenario.notify,
        shutdown_grace=scenario.grace,
    )
    began = time.monotonic()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        await harness.open()
        await scenario.body(harness, plan)
        drain_bound = plan.drain + timing.recovery_bound
        drained = await harness.drain(drain_bound)
        observations = await harness.observe()
    finally:
        await harness.close()
    findings = check(observations, timing.recovery_bound, origin=harness.started)
    findings.metrics["drain_s"] = round(drained, 2)
    extra = scenario.verify(harness, observations, findings, plan) if scenario.verify else []
    violations = findings.violations + extra
    if violations:  # keep the evidence next to the run
        (workdir / "workers.txt").write_text(harness.supervisor.output())
        (workdir / "observations.json").write_text(
            json.dumps(asdict(observations), default=_plain, indent=1)
        )
    plan_dict = asdict(plan)
    return Result(
        number=scenario.number,
        name=scenario.name,
        title=scenario.title,
        seed=used_seed,
        version="short" if short else "full",
        started=stamp,
        seconds=round(time.monotonic() - began, 1),
        timing={**asdict(timing), "recovery_bound": timing.recovery_bound},
        plan=plan_dict,
        metrics=findings.metrics,
        violations=violations,
        orphans=findings.orphans,
        throughput=findings.throughput,
    )


def _plain(value: object) -> object:
    if isinstance(value, set):
        return sorted(value)
    return str(value)
