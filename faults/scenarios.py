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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faults.checker import Findings, Observations, check
from faults.harness import FULL_TIMING, SHORT_TIMING, Durations, Harness, Timing
from faults.queries import query

BASE = Durations(median=0.2, p99=3.0, cap=8.0)


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


async def _with_load(h: Harness, p: Plan, faults: Awaitable[None], kind: str = "publish") -> None:
    """Warm the workers up, then run the paced load and the faults together."""
    specs = h.jobs(p.jobs, p.durations, kind=kind)
    h.start_workers()
    await h.enqueue(specs[: 2 * p.workers])
    await h.warm()
    await asyncio.gather(h.feed(specs[2 * p.workers :], p.window), faults)


async def _kill_storm(h: Harness, p: Plan) -> None:
    await _with_load(h, p, h.kill_storm(p.window, p.kill_every))


async def _kill_storm_and_crashes(h: Harness, p: Plan) -> None:
    async def crashes() -> None:
        for _ in range(2):
            await asyncio.sleep(p.window / 3)
            await h.crash_postgres(down=p.hold)

    await _with_load(h, p, asyncio.gather(h.kill_storm(p.window, p.kill_every), crashes()))


async def _zombie(h: Harness, p: Plan) -> None:
    async def pause_one() -> None:
        index = await h.pick_worker(holding=True)
        h.supervisor.pause(index)
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


async def _cancel_during_rescue(h: Harness, p: Plan) -> None:
    async def kill_and_cancel() -> None:
        end = time.monotonic() + p.window
        while time.monotonic() + p.kill_every <= end:
            await asyncio.sleep(p.kill_every)
            pid = h.supervisor.kill(await h.pick_worker(holding=True))
            async with await h.connect() as conn:
                cur = await conn.execute(query("held_by_pid"), {"pid": pid})
                held = [r["id"] for r in await cur.fetchall()]
                if not held:
                    continue
                cur = await conn.execute(query("cancel_running"), {"ids": held})
                for row in await cur.fetchall():
                    h.cancelled[row["id"]] = row["at"]
            h.event("cancel", pid, f"{len(held)} held jobs")

    await _with_load(h, p, kill_and_cancel())


async def _rogue_lock(h: Harness, p: Plan) -> None:
    await h.enqueue(h.jobs(p.jobs, p.durations))
    async with await h.connect() as rogue:
        async with rogue.transaction():
            cur = await rogue.execute(query("rogue_lock"), {"n": max(1, p.jobs // 30)})
            h.notes["locked"] = [r["id"] for r in await cur.fetchall()]
            h.event("lock", None, f"{len(h.notes['locked'])} waiting rows")
            h.start_workers()
            await asyncio.sleep(p.hold)
        h.notes["released"] = time.time()
        h.event("unlock")


async def _rolling_restart(h: Harness, p: Plan) -> None:
    async def replace_all() -> None:
        for index in range(p.workers):
            await asyncio.sleep(p.window / (p.workers + 1))
            await h.supervisor.replace(index, settle=1.5, grace=h.shutdown_grace)

    await _with_load(h, p, replace_all())


# --- verifications -----------------------------------------------------------------------


def _bit(f: Findings, metric: str, what: str) -> list[str]:
    return [] if f.metrics[metric] > 0 else [f"the fault did not bite: no {what}"]


def _verify_kills(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    return _bit(f, "orphaned_jobs", "job was orphaned by a killed worker")


def _verify_crashes(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    crashes = sum(1 for e in o.events if e.action == "pg_crash")
    problems = [] if crashes == 2 else [f"PostgreSQL crashed {crashes} times, not 2"]
    return problems + _verify_kills(h, o, f, p)


def _verify_zombie(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    return _bit(f, "orphaned_jobs", "job was held by the paused worker") + _bit(
        f, "stale_writes_rejected", "write of the zombie was refused"
    )


def _verify_pickup(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    first: dict[int, float] = {}
    for run in o.executions:
        first.setdefault(run["job_id"], run["started"])
    # Only jobs admitted once the workers were up: booting is not a lost notification.
    warm = float(h.notes.get("warm", 0.0))
    waits = [
        first[j["id"]] - j["created"] for j in o.jobs if j["created"] > warm and j["id"] in first
    ]
    missing = [j["id"] for j in o.jobs if j["id"] not in first]
    longest = max(waits, default=0.0)
    f.metrics["longest_pickup_s"] = round(longest, 3)
    bound = h.timing.poll + 2.0
    if missing:
        return [f"{len(missing)} job(s) never started: {missing[:10]}"]
    if not waits:
        return ["no job was admitted after the workers were up"]
    return [] if longest <= bound else [f"a job waited {longest:.2f}s > poll + 2 s = {bound}s"]


def _verify_failing(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    problems = []
    wrong = [j["id"] for j in o.jobs if j["state"] != "dead" or j["attempt"] != j["max_attempts"]]
    if wrong:
        problems.append(f"{len(wrong)} job(s) not dead with attempts == max_attempts: {wrong[:10]}")
    if len(o.dead_letters) != len(o.jobs):
        problems.append(f"{len(o.dead_letters)} dead letters for {len(o.jobs)} jobs")
    return problems + _bit(f, "rescues", "rescue happened")


def _verify_poison(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    poison = [j for j in o.jobs if j["poison"]]
    others = [j for j in o.jobs if not j["poison"]]
    problems = []
    if len(poison) != 1:
        return [f"expected one poison job, found {len(poison)}"]
    job = poison[0]
    if job["state"] != "dead" or job["attempt"] != job["max_attempts"]:
        problems.append(f"poison job ended {job['state']} after {job['attempt']} attempts")
    letters = [d for d in o.dead_letters if d["job_id"] == job["id"]]
    if [d["reason"] for d in letters] != ["exhausted"]:
        problems.append(f"poison job's dead letter: {letters}")
    unfinished = [j["id"] for j in others if j["state"] != "succeeded"]
    if unfinished:
        problems.append(f"{len(unfinished)} healthy job(s) did not succeed: {unfinished[:10]}")
    return problems


def _verify_cancel(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    f.metrics["cancelled_while_orphaned"] = len(o.cancelled)
    problems = _bit(f, "cancelled_while_orphaned", "job was cancelled while its worker was dead")
    jobs = {j["id"]: j for j in o.jobs}
    ran_again = sorted(
        {r["job_id"] for r in o.executions if o.cancelled.get(r["job_id"], 1e20) < r["started"]}
    )
    if ran_again:
        problems.append(f"{len(ran_again)} cancelled job(s) ran again: {ran_again[:10]}")
    not_cancelled = sorted(i for i in o.cancelled if jobs[i]["state"] != "cancelled")
    if not_cancelled:
        problems.append(f"{len(not_cancelled)} cancelled job(s) changed state: {not_cancelled}")
    return problems


def _verify_rogue(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    locked = set(h.notes.get("locked", []))
    released = float(h.notes.get("released", 0.0))
    f.metrics["locked_rows"] = len(locked)
    problems = _bit(f, "locked_rows", "row was locked")
    late = [
        j["id"]
        for j in o.jobs
        if j["id"] not in locked and (j["finished"] is None or j["finished"] > released)
    ]
    if late:
        problems.append(f"{len(late)} unlocked job(s) waited for the rogue lock: {late[:10]}")
    early = sorted(
        {r["job_id"] for r in o.executions if r["job_id"] in locked and r["started"] < released}
    )
    if early:
        problems.append(f"locked job(s) ran while locked: {early}")
    failed = [j["id"] for j in o.jobs if j["state"] != "succeeded"]
    if failed:
        problems.append(f"{len(failed)} job(s) did not succeed: {failed[:10]}")
    return problems


def _verify_rolling(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    problems = []
    again = [j["id"] for j in o.jobs if j["state"] != "succeeded" or j["attempt"] != 1]
    if again:
        problems.append(f"{len(again)} job(s) not succeeded at attempt 1: {again[:10]}")
    if o.rescues:
        problems.append(f"{len(o.rescues)} rescue(s) during a graceful restart")
    terms = sum(1 for e in o.events if e.action == "term")
    if terms != p.workers:
        problems.append(f"{terms} graceful stops for {p.workers} workers")
    return problems


# --- the catalogue -----------------------------------------------------------------------

SHORT = BASE.scaled(0.5)
_S = Plan(
    jobs=120, workers=3, concurrency=8, window=12.0, durations=SHORT, kill_every=3.0, drain=40.0
)
_F = Plan(jobs=10_000, workers=4, concurrency=25, window=120.0, durations=BASE, drain=120.0)
LONG = Durations(median=1.0, p99=3.0, cap=4.0)


def _with(plan: Plan, **changes: Any) -> Plan:
    return Plan(**{**plan.__dict__, **changes})


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(1, "kill_storm", "Kill storm", 101, _S, _F, _kill_storm, _verify_kills),
        Scenario(
            2,
            "kill_storm_pg_crash",
            "Kill storm + PostgreSQL crashed and restarted twice",
            202,
            _with(_S, hold=2.0),
            _with(_F, hold=5.0),
            _kill_storm_and_crashes,
            _verify_crashes,
        ),
        Scenario(
            3,
            "zombie",
            "Zombie: a worker paused longer than its lease",
            303,
            _with(_S, jobs=150, durations=LONG, hold=SHORT_TIMING.lease + 3),
            _with(_F, jobs=2000, durations=LONG.scaled(2), hold=FULL_TIMING.lease + 5),
            _zombie,
            _verify_zombie,
        ),
        Scenario(
            4,
            "lost_notifications",
            "Lost notifications (NOTIFY off)",
            404,
            _with(_S, window=8.0),
            _with(_F, jobs=3000, window=60.0),
            _quiet,
            _verify_pickup,
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
            _verify_failing,
        ),
        Scenario(
            6,
            "poison_payload",
            "Poison payload",
            606,
            _with(_S, jobs=150, window=6.0),
            _with(_F, jobs=2000, window=30.0),
            _poison,
            _verify_poison,
        ),
        Scenario(
            7,
            "cancel_during_rescue",
            "Cancel during rescue",
            707,
            _with(_S, jobs=150, durations=LONG, kill_every=3.0),
            _with(_F, jobs=2000, durations=LONG.scaled(2), kill_every=5.0),
            _cancel_during_rescue,
            _verify_cancel,
        ),
        Scenario(
            8,
            "rogue_lock",
            "Rogue client holds FOR UPDATE on waiting rows",
            808,
            _with(_S, jobs=300, hold=10.0),
            _with(_F, jobs=3000, hold=60.0),
            _rogue_lock,
            _verify_rogue,
        ),
        Scenario(
            9,
            "rolling_restart",
            "Rolling restart (SIGTERM, replace) under load",
            909,
            _with(_S, window=14.0),
            _with(_F, jobs=5000, window=90.0),
            _rolling_restart,
            _verify_rolling,
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
    await harness.open()
    try:
        await scenario.body(harness, plan)
        drain_bound = plan.drain + timing.recovery_bound
        drained = await harness.drain(drain_bound)
        observations = await harness.observe()
    finally:
        await harness.close()
    findings = check(observations, timing.recovery_bound)
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
        orphans=[(t - harness.started, j, s) for t, j, s in findings.orphans],
        throughput=findings.throughput,
    )


def _plain(value: object) -> object:
    if isinstance(value, set):
        return sorted(value)
    return str(value)
