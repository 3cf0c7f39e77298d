"""Prometheus metrics: durable figures read from the database at scrape time, plus the
in-process figures of a worker and an API running in this process.

Database figures are gauges: they count what the tables retain (jobs, dead letters,
rescue and stale-write records are pruned after their retention), so they can go down.
In-process figures are counters and a histogram of handler durations, fed by
:meth:`HeraldMetrics.watch_worker` and the API's admissions.

Each :class:`HeraldMetrics` owns its own :class:`CollectorRegistry`, so several apps
(or tests) in one process never share or collide on series.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool

from herald import sql, tenancy
from herald.db import AsyncConn
from herald.rows import QueueStats, all_rows, fetch_all, from_row
from herald.states import JobState

if TYPE_CHECKING:
    from herald.worker import Worker

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

# Optional figures: each named statement reads tables that a later layer adds. A
# statement whose tables are absent from this schema is skipped, not an error.
OPTIONAL_QUERIES = (
    "metrics_schedules",
    "metrics_cleanup",
    "metrics_rate_limits",
    "metrics_ingest",
    "metrics_social",
)


# Statements of one count per label combination: name -> (gauge, help, label columns).
COUNTS = {
    "metrics_dead_letters": (
        "herald_dead_letters",
        "Dead letters retained, by kind and reason",
        ("kind", "reason"),
    ),
    "metrics_rescues": (
        "herald_rescues",
        "Lease expiries rescued (retained records), by outcome",
        ("outcome",),
    ),
    "metrics_stale_writes": (
        "herald_stale_writes_rejected",
        "Fenced writes refused because the lease had moved on (retained records)",
        ("operation",),
    ),
    "metrics_tenant_jobs": (
        "herald_tenant_jobs",
        "Jobs retained, by tenant (the first 50 named, the rest 'other') and state",
        ("tenant", "state"),
    ),
}


@dataclass(frozen=True)
class JobFigures:
    """Retained jobs of one kind and state (``metrics_jobs``)."""

    kind: str
    state: JobState
    n: int
    retries: int  # attempts after the first
    snoozes: int


@dataclass(frozen=True)
class Count:
    """One row of a :data:`COUNTS` statement: its label values, in order, and the count."""

    labels: tuple[str, ...]
    n: float


@dataclass(frozen=True)
class NamedGauge:
    """One row of an optional statement: a gauge's name, help, labels and value."""

    metric: str
    help: str
    labels: dict[str, Any] | None
    value: float | None


@dataclass
class Snapshot:
    """The database's figures as of one scrape."""

    up: bool = False
    took: float = 0.0
    jobs: list[JobFigures] = field(default_factory=list)
    queues: list[QueueStats] = field(default_factory=list)
    counts: dict[str, list[Count]] = field(default_factory=dict)  # by statement
    named: dict[str, list[NamedGauge]] = field(default_factory=dict)  # by optional statement


class _DatabaseCollector(Collector):
    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        snap = self.snapshot
        up = GaugeMetricFamily("herald_database_up", "1 if the last scrape reached the database")
        up.add_metric([], 1.0 if snap.up else 0.0)
        yield up
        took = GaugeMetricFamily(
            "herald_scrape_database_seconds", "Time the last scrape spent in the database"
        )
        took.add_metric([], snap.took)
        yield took
        if not snap.up:
            return
        yield from _jobs(snap.jobs)
        yield from _queues(snap.queues)
        for name, (gauge, doc, labels) in COUNTS.items():
            yield _gauge(gauge, doc, list(labels), snap.counts.get(name, []))
        for name in OPTIONAL_QUERIES:
            yield from _named_gauges(snap.named.get(name, []))


def _gauge(name: str, doc: str, labels: list[str], counts: list[Count]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for count in counts:
        family.add_metric(list(count.labels), count.n)
    return family


def _jobs(rows: list[JobFigures]) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        "herald_jobs", "Jobs retained in the database, by kind and state", labels=["kind", "state"]
    )
    retries = GaugeMetricFamily(
        "herald_job_retries", "Retries (attempts after the first) of retained jobs", labels=["kind"]
    )
    snoozes = GaugeMetricFamily(
        "herald_job_snoozes", "Snoozes (rate limits and the like) of retained jobs", labels=["kind"]
    )
    per_kind: dict[str, list[float]] = {}
    for row in rows:
        jobs.add_metric([row.kind, row.state.value], float(row.n))
        totals = per_kind.setdefault(row.kind, [0.0, 0.0])
        totals[0] += float(row.retries)
        totals[1] += float(row.snoozes)
    for kind, (retried, snoozed) in sorted(per_kind.items()):
        retries.add_metric([kind], retried)
        snoozes.add_metric([kind], snoozed)
    yield from (jobs, retries, snoozes)


def _queues(rows: list[QueueStats]) -> Iterator[Metric]:
    families = {
        "available": GaugeMetricFamily(
            "herald_queue_depth", "Jobs waiting and due now, by queue", labels=["queue"]
        ),
        "scheduled": GaugeMetricFamily(
            "herald_queue_scheduled", "Jobs waiting for a later run time", labels=["queue"]
        ),
        "running": GaugeMetricFamily(
            "herald_queue_running", "Jobs running under a lease", labels=["queue"]
        ),
        "oldest_waiting_s": GaugeMetricFamily(
            "herald_queue_oldest_waiting_seconds",
            "Age of the oldest due job not yet started",
            labels=["queue"],
        ),
    }
    for row in rows:
        for column, family in families.items():
            family.add_metric([row.queue], float(getattr(row, column) or 0.0))
    yield from families.values()


def _named_gauges(rows: list[NamedGauge]) -> Iterator[Metric]:
    """Optional statements answer rows of (metric, help, labels object, value)."""
    families: dict[str, GaugeMetricFamily] = {}
    for row in rows:
        labels = row.labels or {}
        family = families.get(row.metric)
        if family is None:
            family = GaugeMetricFamily(row.metric, row.help, labels=sorted(labels))
            families[row.metric] = family
        family.add_metric([str(labels[k]) for k in sorted(labels)], float(row.value or 0.0))
    yield from families.values()


class _WorkerCollector(Collector):
    """Counters a worker in this process keeps (see :class:`herald.worker.WorkerStats`)."""

    FIELDS = (
        ("claimed", "Jobs claimed"),
        ("succeeded", "Jobs that succeeded"),
        ("retried", "Attempts that failed and will be retried"),
        ("dead", "Jobs dead-lettered"),
        ("snoozed", "Jobs snoozed (not counted as attempts)"),
        ("cancelled", "Jobs cancelled by their handler"),
        ("lease_lost", "Handlers stopped because their lease was lost"),
        ("stale_writes", "Writes of this worker refused by the fence"),
        ("self_fenced", "Handlers cancelled: lease unconfirmed for R_self by the worker's clock"),
        ("loop_blocked", "Times the event loop was blocked past a quarter of the lease"),
    )

    def __init__(self) -> None:
        self.workers: list[Worker] = []

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        if not self.workers:
            return
        for name, doc in self.FIELDS:
            family = CounterMetricFamily(f"herald_worker_{name}", doc, labels=["worker"])
            for worker in self.workers:
                family.add_metric([worker.owner], float(getattr(worker.stats, name)))
            yield family


class HeraldMetrics:
    """One app's metrics: call :meth:`refresh` before :meth:`render` on each scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._database = _DatabaseCollector()
        self._workers = _WorkerCollector()
        self.registry.register(self._database)
        self.registry.register(self._workers)
        self._included: list[Collector] = []
        self.enqueued = Counter(
            "herald_api_enqueued",
            "Admissions through the HTTP API, by kind and outcome",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.quota_refusals = Counter(
            "herald_api_quota_refusals",
            "Admissions refused because the API key had its quota of active jobs",
            ["key"],
            registry=self.registry,
        )
        self.handler_duration = Histogram(
            "herald_handler_duration_seconds",
            "Handler run time per attempt, by kind and outcome",
            ["kind", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )

    def include(self, collector: Collector) -> None:
        """Serve an application's in-process figures too (once, however often asked)."""
        if collector not in self._included:
            self._included.append(collector)
            self.registry.register(collector)

    def observe_handler(self, kind: str, outcome: str, seconds: float) -> None:
        self.handler_duration.labels(kind, outcome).observe(max(0.0, seconds))

    def watch_worker(self, worker: Worker) -> None:
        """Export a worker of this process: its counters and its handler durations."""
        self._workers.workers.append(worker)
        worker.observers.append(self.observe_handler)

    @tenancy.as_platform  # the deployment's figures: every tenant's rows
    async def refresh(self, pool: AsyncConnectionPool[AsyncConn]) -> Snapshot:
        """Read the durable figures; on a database error they are reported as down."""
        started = time.monotonic()
        snap = Snapshot()
        try:
            async with pool.connection(timeout=5.0) as conn:
                snap.jobs = await fetch_all(conn, "metrics_jobs", {}, JobFigures)
                snap.queues = await fetch_all(conn, "queue_stats", {}, QueueStats)
                for name, (_, _, labels) in COUNTS.items():
                    snap.counts[name] = await _counts(conn, name, labels)
                for name in OPTIONAL_QUERIES:
                    if name in sql.names():
                        snap.named[name] = await _fetch_optional(conn, name)
            snap.up = True
        except (psycopg.Error, OSError) as exc:  # PoolTimeout is a psycopg.Error too
            log.warning("metrics scrape could not read the database: %s", exc)
        snap.took = time.monotonic() - started
        self._database.snapshot = snap
        return snap

    def render(self) -> bytes:
        return generate_latest(self.registry)


async def _counts(conn: AsyncConn, name: str, labels: tuple[str, ...]) -> list[Count]:
    return [
        Count(tuple(str(row[label]) for label in labels), float(row["n"]))
        for row in await all_rows(conn, name)
    ]


async def _fetch_optional(conn: AsyncConn, name: str) -> list[NamedGauge]:
    try:
        async with conn.transaction():
            # No parameters: a statement may hold a literal % (LIKE 'requeued:%').
            cur = await conn.execute(sql.query(name))
            return [from_row(NamedGauge, row) for row in await cur.fetchall()]
    except psycopg.errors.UndefinedTable:
        return []
