"""What each scenario promises beyond the common invariants, and proof its fault bit.

Each ``verify_*`` gets the harness (its notes and timing), the observations and the
common findings (to which it may add metrics) and returns the broken promises.
"""

from __future__ import annotations

import time
from collections import Counter

from faults.checker import Findings, Observations
from faults.harness import Harness, Plan


def bit(f: Findings, metric: str, what: str) -> list[str]:
    """A fault that changed nothing proves nothing: require its trace in ``metric``."""
    return [] if f.metrics[metric] > 0 else [f"the fault did not bite: no {what}"]


def verify_kills(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    return bit(f, "orphaned_jobs", "job was orphaned by a killed worker")


def verify_crashes(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    crashes = sum(1 for e in o.events if e.action == "pg_crash")
    problems = [] if crashes == 2 else [f"PostgreSQL crashed {crashes} times, not 2"]
    return problems + verify_kills(h, o, f, p)


def verify_zombie(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    """The zombie either fences itself on waking (its clock says its leases are long
    unconfirmed: its handlers are cancelled before they write) or its writes are refused."""
    logs = (path.read_text(errors="replace") for path in (h.workdir / "logs").glob("*.log"))
    f.metrics["zombie_handlers_self_fenced"] = sum(text.count("lease unconfirmed") for text in logs)
    gave_up = f.metrics["stale_writes_rejected"] + f.metrics["zombie_handlers_self_fenced"]
    problems = [] if gave_up else ["the fault did not bite: the zombie neither fenced nor wrote"]
    return bit(f, "orphaned_jobs", "job was held by the paused worker") + problems


def verify_pickup(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    # Picked up = claimed, as the database dated it. The handler's first log line comes
    # later by its own connection's wait, which on a loaded machine took seconds (the
    # run then failed although every claim was prompt).
    first: dict[int, float] = {}
    for claim in sorted(o.claims, key=lambda c: (c["job_id"], c["fence"])):
        first.setdefault(claim["job_id"], claim["at"])
    for run in o.executions:  # runs without the claims record: the first log line
        first.setdefault(run["job_id"], run["started"])
    # Only jobs admitted once the workers were up: booting is not a lost notification.
    warm = float(h.notes.get("warm", 0.0))
    waits = [
        first[j["id"]] - j["created"] for j in o.jobs if j["created"] > warm and j["id"] in first
    ]
    missing = [j["id"] for j in o.jobs if j["id"] not in first]
    longest = max(waits, default=0.0)
    f.metrics["longest_pickup_s"] = round(longest, 3)
    # A poll cannot run sooner than the machine lets it: the harness's own worst timer
    # lag (a loaded 2-core machine saw seconds) is added to the bound, and reported.
    lag = float(h.notes.get("max_lag", 0.0))
    f.metrics["harness_max_lag_s"] = round(lag, 3)
    bound = round(h.timing.poll + 2.0 + lag, 2)
    if missing:
        return [f"{len(missing)} job(s) never started: {missing[:10]}"]
    if not waits:
        return ["no job was admitted after the workers were up"]
    if longest <= bound:
        return []
    return [f"a job waited {longest:.2f}s > poll + 2 s + worst timer lag = {bound}s"]


def verify_failing(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    problems = []
    wrong = [j["id"] for j in o.jobs if j["state"] != "dead" or j["attempt"] != j["max_attempts"]]
    if wrong:
        problems.append(f"{len(wrong)} job(s) not dead with attempts == max_attempts: {wrong[:10]}")
    if len(o.dead_letters) != len(o.jobs):
        problems.append(f"{len(o.dead_letters)} dead letters for {len(o.jobs)} jobs")
    return problems + bit(f, "rescues", "rescue happened")


def verify_poison(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
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


def verify_poison_neighbours(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    """Poison jobs (1 %) crash their worker on every attempt: they alone pay for it."""
    poison = [j for j in o.jobs if j["poison"]]
    healthy = [j for j in o.jobs if not j["poison"]]
    letters = {d["job_id"]: d["reason"] for d in o.dead_letters}
    problems = []
    if not poison:
        return ["no poison job"]
    wrong = [
        j["id"]
        for j in poison
        if j["state"] != "dead"
        or j["attempt"] != j["max_attempts"]
        or letters.get(j["id"]) != "lease_exhausted"
    ]
    if wrong:
        problems.append(f"{len(wrong)} poison job(s) not dead after max_attempts: {wrong[:10]}")
    dead = [j["id"] for j in healthy if j["state"] != "succeeded"]
    if dead:
        problems.append(f"{len(dead)} healthy job(s) did not succeed: {dead[:10]}")
    rescued = {r["job_id"] for r in o.rescues}
    neighbours = [j for j in healthy if j["id"] in rescued]
    charged = Counter(r["job_id"] for r in o.rescues if r.get("charged", True))
    f.metrics["poison_jobs"] = len(poison)
    f.metrics["healthy_neighbours_rescued"] = len(neighbours)
    f.metrics["healthy_attempts_charged_by_crashes"] = sum(charged[j["id"]] for j in neighbours)
    return problems + bit(f, "healthy_neighbours_rescued", "healthy job shared a poisoned worker")


def verify_silent_link(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    """The cut-off worker fences itself (cancels its handlers by its own clock before its
    leases end), makes no external call under a superseded fence, and works again soon
    after the link returns."""
    pid = h.notes.get("cut_pid")
    restored = float(h.notes.get("restored", 0.0))
    logs = (path.read_text(errors="replace") for path in (h.workdir / "logs").glob("*.log"))
    f.metrics["self_fenced_handlers"] = sum(text.count("lease unconfirmed") for text in logs)
    back = [r["started"] for r in o.executions if r["pid"] == pid and r["started"] > restored]
    f.metrics["back_at_work_s"] = round(min(back) - restored, 2) if back else None
    problems = bit(f, "orphaned_jobs", "job was held by the cut-off worker")
    problems += bit(f, "self_fenced_handlers", "handler was fenced by its worker's clock")
    if f.metrics["stale_deliveries"]:
        problems.append(f"{f.metrics['stale_deliveries']} sink call(s) under a superseded fence")
    bound = h.timing.poll + h.timing.heartbeat + 5.0
    if not back:
        problems.append("the cut-off worker ran nothing after its link returned")
    elif min(back) - restored > bound:
        problems.append(f"the cut-off worker took {min(back) - restored:.1f}s > {bound:g}s")
    return problems


def verify_cancel(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    f.metrics["cancelled_while_orphaned"] = len(o.cancelled)
    problems = bit(f, "cancelled_while_orphaned", "job was cancelled while its worker was dead")
    jobs = {j["id"]: j for j in o.jobs}
    # A claim made before the cancel may log its first line after it: date claims from
    # the database when the run recorded them.
    starts = [(c["job_id"], c["at"]) for c in o.claims] or [
        (r["job_id"], r["started"]) for r in o.executions
    ]
    ran_again = sorted({job for job, at in starts if o.cancelled.get(job, 1e20) < at})
    if ran_again:
        problems.append(f"{len(ran_again)} cancelled job(s) ran again: {ran_again[:10]}")
    not_cancelled = sorted(i for i in o.cancelled if jobs[i]["state"] != "cancelled")
    if not_cancelled:
        problems.append(f"{len(not_cancelled)} cancelled job(s) changed state: {not_cancelled}")
    return problems


def verify_rogue(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    locked = set(h.notes.get("locked", []))
    released = float(h.notes.get("released", 0.0))
    f.metrics["locked_rows"] = len(locked)
    problems = bit(f, "locked_rows", "row was locked")
    late = [
        j["id"]
        for j in o.jobs
        if j["id"] not in locked and (j["finished"] is None or j["finished"] > released)
    ]
    if late:
        problems.append(f"{len(late)} unlocked job(s) waited for the rogue lock: {late[:10]}")
    early = sorted(
        {c["job_id"] for c in o.claims if c["job_id"] in locked and c["at"] < released}
        | {r["job_id"] for r in o.executions if r["job_id"] in locked and r["started"] < released}
    )
    if early:
        problems.append(f"locked job(s) ran while locked: {early}")
    failed = [j["id"] for j in o.jobs if j["state"] != "succeeded"]
    if failed:
        problems.append(f"{len(failed)} job(s) did not succeed: {failed[:10]}")
    return problems


def verify_rolling(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
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


def verify_schedules(h: Harness, o: Observations, f: Findings, p: Plan) -> list[str]:
    schedules = h.notes.get("final_schedules", [])
    fires = h.notes.get("final_schedule_fires", [])
    by_schedule: dict[int, list[float]] = {}
    for fire in fires:
        by_schedule.setdefault(fire["schedule_id"], []).append(fire["slot"])
    problems = []
    now = time.time()
    for row in schedules:
        slots = by_schedule.get(row["id"], [])
        if len(slots) != len(set(slots)):
            problems.append(f"schedule {row['id']}: a slot fired twice")
        first = h.notes["first_slots"][row["id"]]
        expected = {first + 60 * k for k in range(round((row["next_due"] - first) / 60))}
        if set(slots) != expected:
            problems.append(
                f"schedule {row['id']}: fired {len(slots)} slots, expected {len(expected)}"
            )
        if row["next_due"] <= now - 60:
            problems.append(f"schedule {row['id']} did not catch up")
    created = [x for x in fires if x["outcome"] == "created"]
    if len({x["job_id"] for x in created}) != len(created):
        problems.append("two fires created the same job")
    keyed = sum(1 for j in o.jobs if j["kind"] == "publish")
    if keyed != len(created):
        problems.append(f"{len(created)} fires created jobs, but {keyed} jobs exist")
    f.metrics["schedules"] = len(schedules)
    f.metrics["slots_fired"] = len(fires)
    f.metrics["scheduler_kills"] = sum(
        1 for e in o.events if e.action == "kill" and e.detail.startswith("scheduler")
    )
    minutes = 6 if p.jobs < 1000 else 30
    if len(fires) < len(schedules) * minutes:
        problems.append(f"only {len(fires)} slots fired for {len(schedules)} x {minutes} due")
    return problems + bit(f, "scheduler_kills", "scheduler was killed")
