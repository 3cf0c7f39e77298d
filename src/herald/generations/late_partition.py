"""The reference's trace, "the partition that finished twice", on real worker processes.

09:00 readers of orders/2026-07-14 see generation 41. 09:05 a late file lands. An
operator starts repair run 771 (original inputs + the late file). 09:12 the daily
schedule starts run 772 (original inputs only, planned against generation 41). Run
771's worker process is stopped (SIGSTOP) after writing its output and before
registering it; its lease runs out, another worker rescues the job and runs it again -
the story's attempt 773, the same task under the next fence. Then the stopped worker is
resumed and tries to report.

:func:`replay` runs it and returns what happened, read back from the records;
``herald demo late-partition`` prints it, and a slow test asserts it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo, database_url
from herald.generations import outbox, records, sample
from herald.generations.rows import (
    CandidateDecided,
    Current,
    Decision,
    FeedEvent,
    Manifest,
    RunState,
    TaskProgress,
)
from herald.generations.store import ROOT_VARIABLE
from herald.migrate import migrate
from herald.rows import all_rows, fetch_all

PARTITION = "2026-07-14"
REPAIR_RUN, DAILY_RUN = 771, 772
T = TypeVar("T")


@dataclass
class Trace:
    """What the records say after the trace (each field read from the database)."""

    generation_before: int = 0
    current: Current | None = None
    winner: CandidateDecided | None = None  # with the coordinator's last word on it
    repair_job: TaskProgress | None = None
    daily_decisions: list[Decision] = field(default_factory=list)
    daily_partition: TaskProgress | None = None
    orphans: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    self_fenced: list[str] = field(default_factory=list)
    zombie_candidates: int = 0
    events: list[FeedEvent] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


def orders(first: int, count: int) -> bytes:
    return "".join(
        f'{{"order_id": "o{n:05d}", "amount_cents": {100 + n}, "currency": "EUR", '
        f'"event_time": "{PARTITION}T08:{n % 60:02d}:00Z", "customer_email": "c{n}@example.org"}}\n'
        for n in range(first, first + count)
    ).encode()


async def _until(probe: Callable[[], Awaitable[T | None]], within: float, what: str) -> T:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await probe()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise TimeoutError(f"gave up after {within:.0f}s waiting for {what}")


class _Workers:
    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.procs: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []
        self.logs: dict[int, Path] = {}

    def start(self, name: str) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "herald",
                "--app",
                "herald.generations.sample:app",
                "worker",
                "--queues",
                "generations",
                "--concurrency",
                "2",
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append((proc, log))
        self.logs[proc.pid] = self.log_dir / f"{name}.log"
        return proc

    def by_pid(self, pid: int) -> subprocess.Popen[bytes]:
        return next(proc for proc, _ in self.procs if proc.pid == pid)

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc, log in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            log.close()


async def replay(
    settings: Settings,
    workdir: Path,
    *,
    generation_before: int = 41,
    lease: float = 2.0,
    say: Callable[[str], None] = lambda line: None,
) -> Trace:
    """Play the trace against ``settings``' schema with two worker processes."""
    trace = Trace(generation_before=generation_before)

    def note(line: str) -> None:
        trace.log.append(line)
        say(line)

    url = database_url(settings)
    store, pauses = workdir / "store", workdir / "pauses"
    pauses.mkdir(parents=True, exist_ok=True)
    os.environ[ROOT_VARIABLE] = str(store)
    gens = sample.gens
    gens.use(settings.with_(database_url=url))
    env = {
        **os.environ,
        "HERALD_DATABASE_URL": url,
        "HERALD_SCHEMA": settings.schema,
        "HERALD_LEASE": str(lease),
        "HERALD_POLL_INTERVAL": "0.2",
        "HERALD_RESCUE_INTERVAL": "0.2",
        "HERALD_SHUTDOWN_GRACE": "3",
        "PYTHONUNBUFFERED": "1",
        ROOT_VARIABLE: str(store),
        sample.PAUSE_DIR_VARIABLE: str(pauses),
    }
    conn = await connect(conninfo(url, settings.schema))
    workers = _Workers(env, workdir)
    async with conn:
        await migrate(conn, settings.schema)
        await records.register_dataset(conn, sample.ORDERS)
        workers.start("worker-a")
        workers.start("worker-b")
        try:
            await _play(gens, conn, trace, note, pauses, workers, generation_before)
        finally:
            workers.stop()
        await _read_back(gens, conn, trace)
    return trace


async def _play(
    gens: Any,
    conn: AsyncConn,
    trace: Trace,
    note: Callable[[str], None],
    pauses: Path,
    workers: _Workers,
    before: int,
) -> None:
    day = datetime(2026, 7, 14, tzinfo=UTC)

    async def land(name: str, data: bytes) -> Manifest:
        return await records.receive_input(
            gens,
            conn,
            dataset_name="orders",
            source="shop-export",
            owner="team-orders",
            name=name,
            data=data,
            schema_version=1,
            event_time_from=day,
            event_time_to=day.replace(hour=23),
            record_count=data.count(b"\n"),
            partitions=[PARTITION],
        )

    original = await land("orders-2026-07-14.jsonl", orders(0, 40))
    for _ in range(before):  # the partition's history: generations 1 .. before
        run = await records.plan_run(
            gens,
            conn,
            dataset_name="orders",
            purpose="scheduled",
            definition_version="v18",
            manifest_ids=[original.id],
            partitions=[PARTITION],
            policy="wait",
            requested_by="schedule",
            reason="daily build",
        )
        await _until(functools.partial(_settled, conn, run.id), 60, f"run {run.id}")
    generation = await records.current_generation(conn, "orders", PARTITION)
    note(f"09:00 readers of orders/{PARTITION} see generation {generation}")
    late = await land("orders-2026-07-14-late.jsonl", orders(40, 5))
    note(f"09:05 a late file lands: manifest {late.id} (5 records)")
    (pauses / f"run-{REPAIR_RUN}-fence-1").touch()
    await records.plan_run(
        gens,
        conn,
        dataset_name="orders",
        purpose="repair",
        definition_version="v18",
        manifest_ids=[original.id, late.id],
        partitions=[PARTITION],
        policy="rebase",
        requested_by="operator:ana",
        reason="late file for 2026-07-14",
        run_id=REPAIR_RUN,
    )
    note(f"09:06 repair run {REPAIR_RUN} starts (inputs {original.id}+{late.id})")
    marker = pauses / f"paused-{REPAIR_RUN}-1"
    await _until(lambda: _exists(marker), 60, "run 771's first attempt to write its output")
    paused = workers.by_pid(int((await asyncio.to_thread(marker.read_text)).split()[0]))
    note(
        f"       run {REPAIR_RUN} attempt 1 wrote its output; its worker (pid "
        f"{paused.pid}) is now stopped before registering it"
    )
    await records.plan_run(
        gens,
        conn,
        dataset_name="orders",
        purpose="scheduled",
        definition_version="v18",
        manifest_ids=[original.id],
        partitions=[PARTITION],
        policy="wait",
        requested_by="schedule",
        reason="daily build",
        run_id=DAILY_RUN,
    )
    note(f"09:12 daily run {DAILY_RUN} starts (inputs {original.id} only, base {generation})")
    await _until(lambda: _settled(conn, REPAIR_RUN), 120, "run 771's retry to settle")
    await _until(lambda: _settled(conn, DAILY_RUN), 120, "run 772 to settle")
    note(f"       run {REPAIR_RUN}'s lease ran out; the job was rescued and retried (attempt 773)")
    paused.send_signal(signal.SIGCONT)
    note(f"09:20 the stopped worker resumes and tries to report run {REPAIR_RUN}")
    [task] = await records.tasks(conn, REPAIR_RUN)
    job_id = task.job_id or 0  # a run's task always names its job (plan_run enqueues it)
    zombie_log = workers.logs[paused.pid]

    async def zombie_report() -> list[str]:
        return await _refusals(conn, job_id) or await _self_fenced(zombie_log)

    await _until(zombie_report, 60, "the zombie's report")
    trace.self_fenced = await _self_fenced(zombie_log)


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)


async def _settled(conn: AsyncConn, run_id: int) -> bool:
    run = await records.run(conn, run_id)
    return run is not None and run.state is RunState.SETTLED


async def _self_fenced(log: Path) -> list[str]:
    """On waking, the zombie's own clock finds its lease unconfirmed and cancels the
    handler before it reports anything: a refusal that never reached the database."""
    text = await asyncio.to_thread(log.read_text, errors="replace")
    return [
        "handler cancelled by its own worker: " + line.split(": ", 1)[-1]
        for line in text.splitlines()
        if "cancelling its handler" in line
    ]


async def _refusals(conn: AsyncConn, job_id: int) -> list[str]:
    found = [
        f"candidate registration refused: {d['reason']}"
        for d in await all_rows(conn, "generations_refusals", {"job_id": job_id})
    ]
    found += [
        f"{w['operation']} refused for fence {w['fence']} (worker {w['owner']})"
        for w in await all_rows(conn, "generations_stale_writes", {"job_id": job_id})
    ]
    return found


async def _read_back(gens: Any, conn: AsyncConn, trace: Trace) -> None:
    trace.current = current = await records.current(conn, "orders", PARTITION)
    key = {"dataset": "orders", "partition": PARTITION}
    candidates = await fetch_all(conn, "generations_candidates_of_partition", key, CandidateDecided)
    by_id = {c.id: c for c in candidates}
    trace.winner = by_id.get(current.candidate_id) if current and current.candidate_id else None
    [repair] = await records.tasks(conn, REPAIR_RUN)
    trace.repair_job = repair
    trace.daily_decisions = await fetch_all(
        conn, "generations_decisions_of_run", {"run_id": DAILY_RUN}, Decision
    )
    [trace.daily_partition] = await records.tasks(conn, DAILY_RUN)
    registered = {c.location for c in candidates}
    trace.orphans = [
        p for p in gens.store.attempt_outputs("orders", PARTITION) if p not in registered
    ]
    repair_job = repair.job_id or 0
    trace.refusals = await _refusals(conn, repair_job) + trace.self_fenced
    trace.zombie_candidates = sum(1 for c in candidates if c.job_id == repair_job and c.fence == 1)
    trace.events = await outbox.feed(conn, after=0, dataset="orders", limit=1000)


def report(trace: Trace) -> list[str]:
    """The trace's outcome in words, from the records."""
    w, cur, daily = trace.winner, trace.current, trace.daily_partition
    if w is None or cur is None or daily is None:
        return [f"the trace did not finish: orders/{PARTITION} has no winner to report"]
    lines = [
        f"generation {cur.generation} of orders/{PARTITION} is run {w.run_id}'s "
        f"candidate {w.id}, registered by job {w.job_id} attempt {w.attempt} "
        f"(fence {w.fence}; the story's attempt 773), inputs {cur.manifest_ids}, "
        f"{cur.row_count} rows, checksum {(cur.checksum or '')[:19]}...",
        f"  why: {w.reason}",
    ]
    for d in trace.daily_decisions:
        lines.append(f"run {DAILY_RUN}: {d.decision} ({d.reason_code}): {d.reason}")
    lines.append(f"run {DAILY_RUN}'s partition ends {daily.state}")
    for orphan in trace.orphans:
        lines.append(f"orphaned output (written, never registered, not visible): {orphan}")
    for refusal in trace.refusals:
        lines.append(f"run {REPAIR_RUN}'s late report: {refusal}")
    lines.append(
        f"consumers got {len(trace.events)} events; the last: "
        f"{trace.events[-1].event_type} generation {trace.events[-1].payload['generation']}"
        f" (publication {trace.events[-1].publication_id})"
    )
    return lines


DEMO_SCHEMA = "herald_demo_late_partition"


async def run_demo(settings: Settings) -> int:
    """``herald demo late-partition``: replay the trace in a schema of its own, print it."""
    import tempfile

    from herald import sql

    demo = settings.with_(schema=DEMO_SCHEMA)
    conn = await connect(conninfo(database_url(demo), "public"))
    async with conn:  # a fresh schema each time: the trace starts from nothing
        await conn.execute(
            sql.query_with_identifiers("generations_drop_schema", schema=DEMO_SCHEMA)
        )
    print(f"the late-partition trace, on two worker processes (schema {DEMO_SCHEMA!r})")
    with tempfile.TemporaryDirectory(prefix="herald-late-partition-") as workdir:
        trace = await replay(demo, Path(workdir), say=print)
        print()
        for line in report(trace):
            print(line)
    return 0
