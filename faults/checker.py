"""The checker: reads what the database and the sink hold at the end, judges the run.

Invariants (a violation makes the run fail):

* lost             - a job accepted (or present) that is not terminal at the end;
* duplicated       - a job with more than one effect row, or a sink key applied twice;
* stale applied    - an effect row whose fence is not the job's final, successful fence;
* over attempts    - a job claimed more times than its max_attempts;
* lease overlap    - an attempt claimed while an earlier attempt's lease was still valid;
* orphan > R       - a job held by a dead (or stopped) worker not claimed again within R;
* effect missing   - a succeeded job with no effect row or no sink delivery.

Measured, not judged here: stale deliveries (a sink call made by an attempt whose lease
was already rescued or superseded; the silent-link scenario requires none).

Everything else (stale writes rejected, executions per job, rescues) is measured.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from faults.supervisor import Event

TERMINAL = frozenset({"succeeded", "dead", "cancelled"})
EFFECT_KINDS = frozenset({"publish", "publish_pipeline"})
# Events after which a worker can no longer renew its leases: killed, paused, cut off.
DEATHS = frozenset({"kill", "stop", "cut"})
Row = dict[str, Any]


@dataclass
class Observations:
    """Everything the checker reads, fetched once at the end of the run."""

    accepted: set[int]
    jobs: list[Row]
    executions: list[Row]
    effects: list[Row]
    rescues: list[Row]
    stale_writes: dict[str, int]
    dead_letters: list[Row]
    deliveries: dict[str, int]
    applied: dict[str, int]
    events: list[Event]
    cancelled: dict[int, float] = field(default_factory=dict)  # job id -> cancel time
    # claims as the database dated them (job_id, fence, owner, at); empty: from executions
    claims: list[Row] = field(default_factory=list)
    # every sink delivery: (key = job id, fence of the delivering attempt, time)
    sink_log: list[tuple[str, int, float]] = field(default_factory=list)


@dataclass
class Findings:
    metrics: dict[str, Any]
    violations: list[str]
    orphans: list[tuple[float, int, float]]  # (death at s since origin, job, s orphaned)
    throughput: list[tuple[float, int]]  # (second, jobs finished in it)

    @property
    def ok(self) -> bool:
        return not self.violations


def _pid_of(owner: str) -> int | None:
    parts = owner.rsplit(":", 2)
    try:
        return int(parts[-2])
    except (IndexError, ValueError):
        return None


# After PostgreSQL is back, workers first find their pooled connections dead and open
# new ones (with the pool's reconnect backoff): that time counts as part of the outage.
RECONNECT_ALLOWANCE = 3.0


def _outages(events: list[Event]) -> list[tuple[float, float]]:
    """(down, up + reconnect allowance) intervals of PostgreSQL crashes, from the event log."""
    spans: list[tuple[float, float]] = []
    down: float | None = None
    for event in sorted(events, key=lambda e: e.at):
        if event.action == "pg_crash":
            down = event.at
        elif event.action == "pg_start" and down is not None:
            spans.append((down, event.at + RECONNECT_ALLOWANCE))
            down = None
    merged: list[tuple[float, float]] = []
    for start, end in spans:  # crashes closer than the allowance: count their time once
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _overlap(spans: list[tuple[float, float]], start: float, end: float) -> float:
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in spans)


def _orphans(
    obs: Observations, claims: dict[int, list[tuple[int, float]]]
) -> tuple[list[tuple[float, int, float, float]], int]:
    """Orphan time of each rescued job whose owner died: death -> next claim (or dead)."""
    deaths: dict[int, list[float]] = {}
    for event in obs.events:
        if event.action in DEATHS and event.pid is not None:
            deaths.setdefault(event.pid, []).append(event.at)

    def death_before(pid: int | None, at: float) -> float | None:
        """The owner's last death before ``at`` (a paused worker may be paused again)."""
        times = [t for t in deaths.get(pid, []) if t <= at] if pid is not None else []
        return max(times, default=None)

    outages = _outages(obs.events)
    # A claim whose worker died before its handler logged anything leaves no execution
    # row, but its rescue proves it happened, and before that worker died (or its lease
    # ran out): that moment is an upper bound of the claim's time.
    claims = {job: list(fenced) for job, fenced in claims.items()}
    for rescue in obs.rescues:
        job_id = rescue["job_id"]
        if any(f == rescue["fence"] for f, _ in claims.get(job_id, [])):
            continue
        owner_died = death_before(_pid_of(rescue["owner"]), rescue["at"])
        bound = rescue["at"] if owner_died is None else min(owner_died, rescue["at"])
        claims.setdefault(job_id, []).append((rescue["fence"], bound))
    found: list[tuple[float, int, float, float]] = []  # death, job, orphaned, rescue lag
    without_death = 0
    for rescue in obs.rescues:
        died = death_before(_pid_of(rescue["owner"]), rescue["at"])
        if died is None:
            without_death += 1  # e.g. leases that ran out while PostgreSQL was down
            continue
        if rescue["job_id"] in obs.cancelled:
            continue
        if rescue["outcome"] == "dead":
            recovered: float | None = rescue["at"]
        else:
            later = [t for f, t in claims.get(rescue["job_id"], []) if f > rescue["fence"]]
            recovered = min(later) if later else None
        if recovered is None:
            continue  # never claimed again: reported as lost if it is not terminal
        # Time with PostgreSQL down does not count: nothing can progress then.
        lag = max(0.0, rescue["at"] - died - _overlap(outages, died, rescue["at"]))
        orphaned = max(0.0, recovered - died - _overlap(outages, died, recovered))
        found.append((died, rescue["job_id"], orphaned, lag))
    return found, without_death


def _stale_deliveries(
    obs: Observations, claims: dict[int, list[tuple[int, float]]]
) -> list[tuple[int, int]]:
    """Sink deliveries made under a fence that was no longer current: after that lease was
    rescued (it ran out) or a later attempt was claimed. Stale external effects, whether
    or not the receiver deduplicated them."""
    ended: dict[tuple[int, int], float] = {}
    for rescue in obs.rescues:
        ident = (rescue["job_id"], rescue["fence"])
        ended[ident] = min(ended.get(ident, rescue["at"]), rescue["at"])
    for job_id, fenced in claims.items():
        for fence, _ in fenced:
            later = [t for f, t in fenced if f > fence]
            if later:
                ident = (job_id, fence)
                ended[ident] = min(ended.get(ident, min(later)), min(later))
    stale = []
    for key, fence, at in obs.sink_log:
        try:
            job_id = int(key)
        except ValueError:
            continue
        if at > ended.get((job_id, fence), float("inf")):
            stale.append((job_id, fence))
    return stale


def check(obs: Observations, recovery_bound: float, origin: float | None = None) -> Findings:
    """Judge a run; ``origin`` (default: the first job's admission) is time zero of the series."""
    violations: list[str] = []
    jobs = {j["id"]: j for j in obs.jobs}
    states = Counter(j["state"] for j in obs.jobs)

    lost = sorted(
        {i for i in obs.accepted if i not in jobs or jobs[i]["state"] not in TERMINAL}
        | {i for i, j in jobs.items() if j["state"] not in TERMINAL}
    )
    if lost:
        # Say where they are: still under a live lease when the drain bound passed (the
        # run was behind) reads very differently from waiting or from an expired lease.
        where = Counter(
            "missing"
            if i not in jobs
            else "running under a live lease"
            if jobs[i].get("leased")
            else str(jobs[i]["state"])
            for i in lost
        )
        violations.append(
            f"{len(lost)} job(s) lost (not terminal): {lost[:10]} ({dict(sorted(where.items()))})"
        )

    effects_by_job: dict[int, list[Row]] = defaultdict(list)
    for effect in obs.effects:
        effects_by_job[effect["job_id"]].append(effect)
    duplicated = sorted(i for i, rows in effects_by_job.items() if len(rows) > 1)
    if duplicated:
        violations.append(f"{len(duplicated)} job(s) with duplicated effects: {duplicated[:10]}")
    stale_applied = [
        e
        for e in obs.effects
        if e["job_id"] not in jobs
        or jobs[e["job_id"]]["state"] != "succeeded"
        or jobs[e["job_id"]]["fence"] != e["fence"]
    ]
    if stale_applied:
        ids = sorted({e["job_id"] for e in stale_applied})
        violations.append(f"{len(stale_applied)} stale write(s) applied, jobs {ids[:10]}")

    missing = sorted(
        i
        for i, j in jobs.items()
        if j["state"] == "succeeded"
        and j["kind"] in EFFECT_KINDS
        and (i not in effects_by_job or str(i) not in obs.applied)
    )
    if missing:
        violations.append(f"{len(missing)} succeeded job(s) without their effect: {missing[:10]}")
    sink_twice = sorted(k for k, n in obs.applied.items() if n > 1)
    if sink_twice:
        violations.append(f"{len(sink_twice)} sink key(s) applied twice: {sink_twice[:10]}")

    # Claims as the database dated them; without that record, from the unfenced log (one
    # per (job, fence), at its first line, which a frozen worker writes late).
    claims: dict[int, list[tuple[int, float]]] = defaultdict(list)
    lease_until: dict[tuple[int, int], float] = {}
    seen: set[tuple[int, int]] = set()
    for claim in obs.claims:
        seen.add((claim["job_id"], claim["fence"]))
        claims[claim["job_id"]].append((claim["fence"], claim["at"]))
    for run in obs.executions:
        ident = (run["job_id"], run["fence"])
        if ident not in seen:
            seen.add(ident)
            claims[run["job_id"]].append((run["fence"], run["started"]))
        if run["lease_until"] is not None:
            lease_until[ident] = max(lease_until.get(ident, 0.0), run["lease_until"])
    # An expiry that was not charged (the job was not yet a suspect) gave its attempt
    # back: such a claim does not count against max_attempts.
    refunds = Counter(r["job_id"] for r in obs.rescues if not r.get("charged", True))
    over = sorted(
        i
        for i, j in jobs.items()
        if j["attempt"] > j["max_attempts"]
        or len(claims.get(i, [])) - refunds[i] > j["max_attempts"]
    )
    if over:
        violations.append(f"{len(over)} job(s) claimed more than max_attempts: {over[:10]}")

    # A lease can end two ways: its owner gives it up (an outcome recorded under its
    # fence) or it runs out and the rescuer takes the job. Only the second can overlap:
    # a rescue before the expiry the owner last saw, or a claim before the rescue.
    overlaps = []
    for rescue in obs.rescues:
        ident = (rescue["job_id"], rescue["fence"])
        next_claims = [t for f, t in claims.get(rescue["job_id"], []) if f > rescue["fence"]]
        if rescue["at"] < lease_until.get(ident, float("-inf")) or (
            next_claims and min(next_claims) < rescue["at"]
        ):
            overlaps.append(rescue["job_id"])
    concurrent = 0
    ends: dict[tuple[int, int], float] = {}
    for run in obs.executions:
        if run["ended"] is not None:
            ident = (run["job_id"], run["fence"])
            ends[ident] = max(ends.get(ident, 0.0), run["ended"])
    for job_id, fenced in claims.items():
        ordered = sorted(fenced)
        for (f1, _), (_, start2) in itertools.pairwise(ordered):
            if ends.get((job_id, f1), 0.0) > start2:
                concurrent += 1  # the old attempt still ran after its lease was gone
    if overlaps:
        violations.append(f"{len(overlaps)} lease overlap(s), jobs {sorted(overlaps)[:10]}")

    stale_deliveries = _stale_deliveries(obs, claims)
    orphans, without_death = _orphans(obs, claims)
    late = [(job, round(s, 1), round(lag, 1)) for _, job, s, lag in orphans if s > recovery_bound]
    if late:
        violations.append(
            f"{len(late)} orphaned job(s) not claimed again within R={recovery_bound:g}s "
            f"(job, seconds orphaned, of which until its rescue): {late[:10]}"
        )

    runs_per_job = Counter(len(claims.get(i, [])) for i in jobs)
    deliveries = sum(obs.deliveries.values())
    finished = [j["finished"] for j in obs.jobs if j["finished"] is not None]
    start = min((j["created"] for j in obs.jobs), default=0.0) if origin is None else origin
    per_second = Counter(int(t - start) for t in finished)
    throughput = [(float(s), per_second.get(s, 0)) for s in range(max(per_second, default=-1) + 1)]
    metrics: dict[str, Any] = {
        "jobs": len(obs.jobs),
        "accepted": len(obs.accepted),
        "states": dict(sorted(states.items())),
        "lost": len(lost),
        "duplicated_effects": len(duplicated),
        "stale_writes_applied": len(stale_applied),
        "stale_writes_rejected": sum(obs.stale_writes.values()),
        "stale_writes_by_operation": dict(obs.stale_writes),
        "executions": len(obs.executions),
        "attempts_per_job": {str(k): v for k, v in sorted(runs_per_job.items())},
        "max_attempts_used": max(runs_per_job, default=0),
        "over_max_attempts": len(over),
        "lease_overlaps": len(overlaps),
        "concurrent_stale_executions": concurrent,
        "rescues": len(obs.rescues),
        "rescues_not_charged": sum(refunds.values()),
        "rescues_without_death": without_death,
        "orphaned_jobs": len(orphans),
        "longest_orphan_s": round(max((o[2] for o in orphans), default=0.0), 3),
        "longest_rescue_lag_s": round(max((o[3] for o in orphans), default=0.0), 3),
        "recovery_bound_s": recovery_bound,
        "deaths": sum(1 for e in obs.events if e.action in DEATHS),
        "dead_letters": dict(Counter(d["reason"] for d in obs.dead_letters)),
        "sink_keys": len(obs.applied),
        "sink_deliveries": deliveries,
        "sink_redeliveries": deliveries - len(obs.deliveries),
        "stale_deliveries": len(stale_deliveries),
        "stale_deliveries_jobs": sorted({job for job, _ in stale_deliveries})[:10],
        "effects_missing": len(missing),
    }
    series = [(d - start, j, o) for d, j, o, _ in orphans]
    return Findings(metrics, violations, series, throughput)
