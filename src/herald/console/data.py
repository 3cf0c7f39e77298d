"""What the console reads, always on behalf of a :class:`~herald.console.sessions.Caller`.

Every function takes the caller first: what a key may see is decided here, once (its
scopes: tracebacks only for ``operate``; its tenant's rows only, as the whole request
acts for the key's tenant and row-level security applies). Reads go through the
engine's own functions (:mod:`herald.ops`, :mod:`herald.schedules`, the client) and
named statements; nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from markupsafe import Markup

from herald import sql
from herald.console import charts
from herald.console.render import duration as render_duration
from herald.console.sessions import Caller
from herald.db import Row
from herald.errors import UnknownKind
from herald.ops import audit, deadletters, queue_samples
from herald.ops.audit import AuditEntry
from herald.ops.deadletters import DeadLetter, ListedDeadLetter
from herald.rows import Job, JobSummary, fetch_all, from_row, one_row
from herald.schedules import get_schedule, list_fires, list_schedules
from herald.schedules.rows import Schedule, ScheduleFire
from herald.states import JobState

T = TypeVar("T")

# name -> (window seconds, bucket seconds)
WINDOWS = {"1h": (3600, 60), "6h": (6 * 3600, 300), "24h": (24 * 3600, 1200)}
JOB_STATES = tuple(JobState)


def may_see_tracebacks(caller: Caller) -> bool:
    """Tracebacks name code, paths and data: operators only, never plain readers."""
    return caller.allows("operate")


def _scrub(value: Any) -> Any:
    """``value`` without any ``traceback`` entry, at any depth."""
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k != "traceback"}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _visible(caller: Caller, value: Any) -> Any:
    return value if may_see_tracebacks(caller) else _scrub(value)


async def _rows(caller: Caller, name: str, params: dict[str, Any]) -> list[Row]:
    async with caller.state.client.pool.connection() as conn:
        cur = await conn.execute(sql.query(name), params)
        return await cur.fetchall()


async def _typed(caller: Caller, name: str, params: dict[str, Any], cls: type[T]) -> list[T]:
    async with caller.state.client.pool.connection() as conn:
        return await fetch_all(conn, name, params, cls)


async def _one(caller: Caller, name: str, params: dict[str, Any], cls: type[T]) -> T:
    """The row of a statement that always answers one (a row of subqueries)."""
    async with caller.state.client.pool.connection() as conn:
        return from_row(cls, await one_row(conn, name, params))


# --- overview -----------------------------------------------------------------------------


@dataclass
class QueueActivity:
    """One queue: what waits and runs now, and what finished and failed per time slot."""

    queue: str
    slots: int
    available: int = 0
    scheduled: int = 0
    running: int = 0
    oldest_waiting_s: float | None = None
    succeeded: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    # From the queue samples, per slot: None where no sample was taken.
    due_over_time: list[int | None] = field(default_factory=list)
    running_over_time: list[int | None] = field(default_factory=list)
    oldest_over_time: list[float | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        for series in (self.succeeded, self.dead, self.failed):
            series.extend([0] * (self.slots - len(series)))
        for sampled in (self.due_over_time, self.running_over_time, self.oldest_over_time):
            sampled.extend([None] * (self.slots - len(sampled)))

    def idle_at(self, slot: int) -> None:
        """A sample in ``slot`` found nothing waiting or running in this queue."""
        if self.due_over_time[slot] is None:
            self.due_over_time[slot] = 0
            self.running_over_time[slot] = 0

    @property
    def completed(self) -> int:
        return sum(self.succeeded)

    @property
    def failed_attempts(self) -> int:
        return sum(self.failed)

    @property
    def failure_rate(self) -> float | None:
        """Failed attempts per attempt that ended (succeeded or failed), in percent."""
        ended = self.completed + self.failed_attempts
        return None if ended == 0 else 100.0 * self.failed_attempts / ended

    def rates(self) -> list[float | None]:
        return [
            None if s + f == 0 else 100.0 * f / (s + f)
            for s, f in zip(self.succeeded, self.failed, strict=True)
        ]


@dataclass(frozen=True)
class Totals:
    """Counts the overview shows beside the queues (``console_totals``); stale writes and
    rescues within the window."""

    now: datetime
    dead_letters: int
    cleanup_pending: int
    cleanup_failing: int
    stale_writes: int
    rescues: int
    schedules_paused: int
    schedules_overdue: int


@dataclass
class Overview:
    window: str
    bucket_s: int
    queues: list[QueueActivity]
    states: dict[str, int]
    totals: Totals

    def throughput_chart(self, index: int, queue: QueueActivity) -> Markup:
        per = charts_unit(self.bucket_s)
        peak = max((s + d for s, d in zip(queue.succeeded, queue.dead, strict=True)), default=0)
        return charts.bars(
            f"tp-{index}",
            f"Jobs finished in queue {queue.queue}, last {self.window}",
            f"{queue.completed} succeeded and {sum(queue.dead)} died in the last "
            f"{self.window}; at most {peak} {per}. Dead jobs are stacked in the darker shade.",
            queue.succeeded,
            queue.dead,
        )

    def failure_chart(self, index: int, queue: QueueActivity) -> Markup:
        rate = queue.failure_rate
        said = "no attempt ended" if rate is None else f"{rate:.1f}% of attempts failed"
        return charts.rate_line(
            f"fr-{index}",
            f"Failure rate of queue {queue.queue}, last {self.window}",
            f"{said} in the last {self.window} ({queue.failed_attempts} failed attempts); "
            f"the line shows the share of failed attempts {charts_unit(self.bucket_s)}, 0 to 100%.",
            queue.rates(),
        )

    def _sampled(self) -> str:
        every = f"{queue_samples.SAMPLE_EVERY:.0f} s"
        return f"sampled every {every}, the most {charts_unit(self.bucket_s)}"

    def depth_chart(self, index: int, queue: QueueActivity) -> Markup:
        seen = [v for v in queue.due_over_time if v is not None]
        said = (
            f"at most {max(seen)} jobs due at once, {queue.available} now"
            if seen
            else "no sample taken in this window yet"
        )
        return charts.bars(
            f"dp-{index}",
            f"Jobs due in queue {queue.queue}, last {self.window}",
            f"{said} ({self._sampled()}).",
            [v or 0 for v in queue.due_over_time],
        )

    def running_chart(self, index: int, queue: QueueActivity) -> Markup:
        seen = [v for v in queue.running_over_time if v is not None]
        said = (
            f"at most {max(seen)} jobs running at once, {queue.running} now"
            if seen
            else "no sample taken in this window yet"
        )
        return charts.bars(
            f"rn-{index}",
            f"Jobs running in queue {queue.queue}, last {self.window}",
            f"{said} ({self._sampled()}).",
            [v or 0 for v in queue.running_over_time],
        )

    def age_chart(self, index: int, queue: QueueActivity) -> Markup:
        seen = [v for v in queue.oldest_over_time if v is not None]
        said = (
            f"the oldest due job waited at most {render_duration(max(seen))}"
            if seen
            else "no job waited past its due time in the samples"
        )
        return charts.line(
            f"ag-{index}",
            f"Oldest due job's age in queue {queue.queue}, last {self.window}",
            f"{said} ({self._sampled()}); a gap is a time nothing was due.",
            queue.oldest_over_time,
        )


def charts_unit(bucket_s: int) -> str:
    return "per minute" if bucket_s == 60 else f"per {bucket_s // 60} minutes"


async def overview(caller: Caller, window: str) -> Overview:
    window_s, bucket_s = WINDOWS[window]
    slots = window_s // bucket_s
    queues: dict[str, QueueActivity] = {}
    for stats in await caller.state.client.queue_stats():
        queues[stats.queue] = QueueActivity(
            stats.queue,
            slots,
            available=stats.available,
            scheduled=stats.scheduled,
            running=stats.running,
            oldest_waiting_s=stats.oldest_waiting_s,
        )
    params = {"window_s": window_s, "bucket_s": bucket_s}
    for row in await _rows(caller, "console_queue_activity", params):
        activity = queues.setdefault(row["queue"], QueueActivity(row["queue"], slots))
        slot = min(max(row["slot"], 0), slots - 1)  # a job that ended this very instant
        activity.succeeded[slot] += row["succeeded"]
        activity.dead[slot] += row["dead"]
        activity.failed[slot] += row["failed"]
    sampled: set[int] = set()
    for row in await _rows(caller, "console_queue_history", params):
        slot = min(max(row["slot"], 0), slots - 1)
        sampled.add(slot)
        if row["queue"] is None:  # a sample with every queue idle
            continue
        activity = queues.setdefault(row["queue"], QueueActivity(row["queue"], slots))
        activity.due_over_time[slot] = max(activity.due_over_time[slot] or 0, row["available"])
        activity.running_over_time[slot] = max(
            activity.running_over_time[slot] or 0, row["running"]
        )
        if row["oldest_waiting_s"] is not None:
            oldest = activity.oldest_over_time[slot] or 0.0
            activity.oldest_over_time[slot] = max(oldest, row["oldest_waiting_s"])
    for activity in queues.values():  # sampled, and not in the sample: it held nothing
        for slot in sampled:
            activity.idle_at(slot)
    totals = await _one(caller, "console_totals", {"window_s": window_s}, Totals)
    states: dict[str, int] = {state.value: 0 for state in JOB_STATES}
    states.update(await caller.state.client.state_counts())
    return Overview(
        window, bucket_s, sorted(queues.values(), key=lambda q: q.queue), states, totals
    )


# --- jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobFilters:
    state: str | None = None
    kind: str | None = None
    queue: str | None = None
    key: str | None = None
    api_key: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before_id: int | None = None
    limit: int = 50


@dataclass(frozen=True)
class ListedJob(JobSummary):
    """A job in the console's list (``console_job_list``): who submitted it over the API."""

    submitted_by: str | None  # the API key's name; None: not submitted over the API


async def jobs(caller: Caller, filters: JobFilters) -> list[ListedJob]:
    params = {
        "state": filters.state,
        "kind": filters.kind,
        "queue": filters.queue,
        "key": filters.key,
        "api_key": filters.api_key,
        "created_from": filters.created_from,
        "created_to": filters.created_to,
        "before_id": filters.before_id,
        "limit": filters.limit,
    }
    return await _typed(caller, "console_job_list", params, ListedJob)


@dataclass(frozen=True)
class StepView:
    name: str
    status: str  # done, running, failed, next, pending


@dataclass(frozen=True)
class JobRelations:
    """What else the database knows of a job (``console_job_relations``); its rescues and
    refused stale writes are JSON records."""

    dead_letter_id: int | None
    submitted_by: str | None
    rescues: list[dict[str, Any]]
    stale_writes: list[dict[str, Any]]


@dataclass
class JobDetail:
    job: Job
    dead_letter_id: int | None
    submitted_by: str | None
    rescues: list[dict[str, Any]]
    stale_writes: list[dict[str, Any]]
    steps: list[StepView]
    audit: list[AuditEntry]
    timeline: list[tuple[datetime, str, str]]  # (when, what, detail), oldest first


def _steps(caller: Caller, job: Job) -> list[StepView]:
    try:
        kind = caller.state.app.kind(job.kind)
    except UnknownKind:
        return []
    names = [step.name for step in kind.steps] if kind.pipeline else []
    if not names:
        return []
    try:
        current = kind.first_step_index(job.step)
    except LookupError:
        return [StepView(name, "pending") for name in names]
    here = {
        JobState.RUNNING: "running",
        JobState.DEAD: "failed",
        JobState.CANCELLED: "failed",
    }.get(job.state, "next")
    views = []
    for index, name in enumerate(names):
        if job.state == JobState.SUCCEEDED or index < current:
            views.append(StepView(name, "done"))
        elif index == current:
            views.append(StepView(name, here))
        else:
            views.append(StepView(name, "pending"))
    return views


def _moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _timeline(
    job: Job, rescues: list[dict[str, Any]], stale: list[dict[str, Any]]
) -> list[tuple[datetime, str, str]]:
    events: list[tuple[datetime, str, str]] = [(job.created_at, "admitted", "")]
    if job.replay_of:
        events[0] = (job.created_at, "admitted", f"replay of job {job.replay_of}")
    for error in job.errors:
        at = _moment(error.get("at"))
        if at is not None:
            what = f"attempt {error.get('attempt', '?')} failed ({error.get('kind', 'error')})"
            events.append((at, what, str(error.get("message", ""))))
    notes = (
        (rescues, "lease expired", "{owner} (fence {fence}) -> {outcome}"),
        (stale, "stale write refused", "{operation} by {owner} (fence {fence})"),
    )
    for records, what, said in notes:
        for record in records:
            at = _moment(record.get("at"))
            if at is not None:
                events.append((at, what, said.format(**record)))
    if job.attempted_at is not None:
        events.append((job.attempted_at, f"attempt {job.attempt} started", ""))
    if job.finished_at is not None:
        events.append((job.finished_at, job.state.value, ""))
    return sorted(events, key=lambda e: e[0])


async def job(caller: Caller, job_id: int) -> JobDetail | None:
    found = await caller.state.client.get_job(job_id)
    if found is None:
        return None
    row = replace(found, errors=_visible(caller, found.errors))
    relations = await _one(caller, "console_job_relations", {"id": job_id}, JobRelations)
    entries = await audit_entries(caller, target_type="job", target_id=str(job_id), limit=20)
    return JobDetail(
        job=row,
        dead_letter_id=relations.dead_letter_id,
        submitted_by=relations.submitted_by,
        rescues=relations.rescues,
        stale_writes=relations.stale_writes,
        steps=_steps(caller, row),
        audit=entries,
        timeline=_timeline(row, relations.rescues, relations.stale_writes),
    )


# --- dead letters -------------------------------------------------------------------------


async def dead_letters(caller: Caller, **filters: Any) -> list[ListedDeadLetter]:
    return await deadletters.list_dead(caller.state.client.pool, **filters)


async def dead_letter(caller: Caller, dead_letter_id: int) -> DeadLetter:
    """One dead letter in full (NotFound if there is none)."""
    row = await deadletters.get(caller.state.client.pool, dead_letter_id)
    return replace(row, errors=_visible(caller, row.errors))


# --- schedules ----------------------------------------------------------------------------


async def schedules(caller: Caller, **filters: Any) -> list[Schedule]:
    return await list_schedules(caller.state.client.pool, **filters)


async def schedule(caller: Caller, schedule_id: int) -> Schedule | None:
    return await get_schedule(caller.state.client.pool, schedule_id)


async def schedule_fires(caller: Caller, schedule_id: int, limit: int = 50) -> list[ScheduleFire]:
    return await list_fires(caller.state.client.pool, schedule_id, limit=limit)


# --- audit --------------------------------------------------------------------------------


async def audit_entries(caller: Caller, **filters: Any) -> list[AuditEntry]:
    rows = await audit.entries(caller.state.client.pool, **filters)
    if may_see_tracebacks(caller):
        return rows
    return [replace(row, before=_scrub(row.before), after=_scrub(row.after)) for row in rows]
