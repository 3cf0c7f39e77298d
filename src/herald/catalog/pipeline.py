"""The publication pipeline as Herald jobs: ``catalog.publish`` and ``catalog.delete_version``.

``catalog.publish`` (key = dataset id) runs ``get_data`` then ``persist_data``; the job's
version number *is* the dataset version (one numbering: :func:`request_publication`
records the version row with the job's number in the admitting transaction, and a
scheduled fire, which admits the job alone, gets its row from ``get_data``).

The catalog entry of a dataset always shows its highest published version. When that
version is deleted, or a failed attempt had already written its own entry, the entry is
put back to the highest version still published (from the Turtle stored on its row),
or removed when none is left.

A dead attempt is compensated by the cleanup runner from its dead letter: the files of
that version are deleted, the entry is put back if the attempt wrote one, and the
version is marked failed. All of it is idempotent; a published version is never touched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row
from rdflib import Graph

from herald import sql
from herald.catalog import datasets as registry
from herald.catalog.datasets import Dataset, UnknownDataset, UnknownVersion, check_dataset
from herald.catalog.errors import CatalogError
from herald.catalog.export import ExportedFile, ExportResult, version_prefix
from herald.catalog.publishing import (
    CatalogSettings,
    MetadataRejected,
    build_entry,
    export_version,
    write_entry,
)
from herald.catalog.runtime import (
    CatalogRuntime,
    ProgressEvent,
    ProgressObserver,
    attach_runtime,
    catalog_runtime,
    close_embedded_store,
    shared_triple_store,
)
from herald.catalog.source_access import Cancellation, SourceAccess
from herald.catalog.triplestore import TripleStore, delete_entry, replace_entry
from herald.client import Client, Enqueued, Outcome
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn, conninfo
from herald.errors import Permanent
from herald.registry import Herald
from herald.schedules import (
    ScheduleError,
    ScheduleSpec,
    create_schedule,
    delete_schedule,
    get_schedule,
    update_schedule,
)

__all__ = [
    "DELETE_VERSION",
    "PUBLISH",
    "CatalogRuntime",
    "ProgressEvent",
    "ProgressObserver",
    "catalog_runtime",
    "close_embedded_store",
    "recurrence_spec",
    "register_catalog",
    "request_deletion",
    "request_publication",
    "save_dataset",
    "shared_triple_store",
]

PUBLISH = "catalog.publish"
DELETE_VERSION = "catalog.delete_version"
STEPS = ["get_data", "persist_data"]
CATALOG_ACTOR = "catalog"  # who the audit log names for schedule changes of datasets
HEARTBEAT_EVERY = 3.0  # seconds between lease heartbeats during an export


# --- admission --------------------------------------------------------------------------


async def request_publication(client: Client, dataset_id: str) -> Enqueued:
    """Admit a publication of ``dataset_id``; its version is the job's version.

    A second request while one is active returns the active job (``in_progress``) and
    creates nothing. Raises :class:`UnknownDataset` for an unregistered dataset.
    """
    async with client.pool.connection() as conn, conn.transaction():
        if await registry.get_dataset(conn, dataset_id) is None:
            raise UnknownDataset(dataset_id)
        admitted = await client.enqueue(
            PUBLISH, {"dataset_id": dataset_id}, key=dataset_id, conn=conn
        )
        created = admitted.outcome is Outcome.CREATED
        if created and not await _create_version(conn, dataset_id, admitted.version, admitted.id):
            # Rolls the admission back: two publications must never share a number.
            raise CatalogError(
                f"version {admitted.version} of {dataset_id!r} already exists; "
                "publications must be requested through the catalog pipeline"
            )
        return admitted


async def _create_version(conn: AsyncConn, dataset_id: str, version: int, job_id: int) -> bool:
    """Record ``version`` as requested; False if that version already exists.

    No publication job is active (its admission was just granted), so a version still
    active belongs to an attempt that ended without publishing whose compensation has
    not run yet: it is marked failed now, and the compensation finds it so.
    """
    params = {"dataset_id": dataset_id, "version": version, "job_id": job_id}
    for _ in range(3):
        try:
            async with conn.transaction():
                cur = await conn.execute(sql.query("catalog_version_create"), params)
                row = await cur.fetchone()
            return row is not None
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "dataset_versions_one_active":
                raise
            cur = await conn.execute(
                sql.query("catalog_version_active"), {"dataset_id": dataset_id}
            )
            stale = await cur.fetchone()
            if stale is not None:
                await registry.transition(
                    conn,
                    dataset_id,
                    stale["version"],
                    "failed",
                    error=f"publication job {stale['job_id']} ended without publishing",
                )
    raise CatalogError(f"could not record version {version} of {dataset_id!r}")


async def request_deletion(client: Client, dataset_id: str, version: int) -> Enqueued:
    """Admit a job removing version ``version``'s files and catalog entry.

    Only a published or failed version can be deleted (an active one is still being
    published); the version shows ``deleting`` until the job is done.
    """
    async with client.pool.connection() as conn, conn.transaction():
        if await registry.get_dataset(conn, dataset_id) is None:
            raise UnknownDataset(dataset_id)
        record = await registry.get_version(conn, dataset_id, version)
        if record is None:
            raise UnknownVersion(dataset_id, version)
        if record.state == "deleted":
            raise CatalogError(f"version {version} of {dataset_id!r} is already deleted")
        admitted = await client.enqueue(
            DELETE_VERSION,
            {"dataset_id": dataset_id, "version": version},
            key=f"{dataset_id}/v{version}",
            conn=conn,
        )
        if admitted.outcome is Outcome.CREATED:
            await registry.transition(conn, dataset_id, version, "deleting")
        return admitted


# --- registration -----------------------------------------------------------------------

RECURRENCE_FIELDS = ("frequency", "timezone", "at", "weekday", "day", "cron", "misfire")


def recurrence_spec(dataset_id: str, recurrence: Mapping[str, Any]) -> ScheduleSpec:
    """The schedule of a dataset's recurrence: ``{"frequency": "daily", "timezone":
    "Europe/Brussels", "at": "02:00"}`` (also ``weekday``, ``day``, ``cron``, ``misfire``)."""
    unknown = set(recurrence) - set(RECURRENCE_FIELDS)
    if unknown:
        raise ScheduleError(f"unknown recurrence field(s): {', '.join(sorted(unknown))}")
    at = recurrence.get("at")
    if at is not None and not isinstance(at, dt.time):
        try:
            at = dt.time.fromisoformat(str(at))
        except ValueError:
            raise ScheduleError(
                f"recurrence 'at' must be a time such as 02:00, got {at!r}"
            ) from None
    spec = ScheduleSpec(
        kind=PUBLISH,
        key=dataset_id,
        frequency=str(recurrence.get("frequency", "")),
        timezone=str(recurrence.get("timezone", "UTC")),
        at=at,
        weekday=recurrence.get("weekday"),
        day=recurrence.get("day"),
        cron=recurrence.get("cron"),
        payload={"dataset_id": dataset_id},
        misfire=str(recurrence.get("misfire", "once")),
    )
    spec.validate()
    return spec


async def save_dataset(
    client: Client, dataset: Dataset, recurrence: Mapping[str, Any] | None = None
) -> tuple[Dataset, bool]:
    """Register (or update) ``dataset`` with its optional recurrence, in one transaction.

    A recurrence is a schedule of ``catalog.publish`` keyed by the dataset id: created,
    changed in place, or deleted when the dataset is registered again without one.
    Returns the stored dataset and whether it was new; bad input writes nothing.
    """
    check_dataset(dataset)
    spec = None if recurrence is None else recurrence_spec(dataset.id, recurrence)
    # What can be checked now is: a file that is not there, a role that cannot be used.
    settings = client.settings
    own = conninfo(settings.database_url, settings.schema) if settings.database_url else None
    access = SourceAccess.for_settings(settings, herald_conninfo=own)
    await asyncio.to_thread(access.check, dict(dataset.source))
    reason = "dataset registered"
    async with client.pool.connection() as conn, conn.transaction():
        existing = await registry.get_dataset(conn, dataset.id)
        schedule_id = existing.schedule_id if existing is not None else None
        if schedule_id is not None and await get_schedule(conn, schedule_id) is None:
            schedule_id = None
        if spec is not None and schedule_id is not None:
            changes = {f: getattr(spec, f) for f in ("frequency", "timezone", "at", "weekday")}
            changes.update(day=spec.day, cron=spec.cron, misfire=spec.misfire)
            await update_schedule(
                conn, schedule_id, actor=CATALOG_ACTOR, reason=reason, app=client.app, **changes
            )
        elif spec is not None:
            row = await create_schedule(conn, spec, app=client.app)
            schedule_id = int(row["id"])
        elif schedule_id is not None:
            await delete_schedule(
                conn, schedule_id, actor=CATALOG_ACTOR, reason=f"{reason} without a recurrence"
            )
            schedule_id = None
        return await registry.register_dataset(
            conn, dataclasses.replace(dataset, schedule_id=schedule_id)
        )


# --- the jobs ---------------------------------------------------------------------------


def register_catalog(
    app: Herald, settings: Settings, catalog: CatalogSettings | None = None
) -> None:
    """Register ``catalog.publish`` and ``catalog.delete_version`` on ``app``.

    ``catalog`` defaults to :meth:`CatalogSettings.from_env`.
    """
    runtime = CatalogRuntime(settings, catalog or CatalogSettings.from_env())
    attach_runtime(app, runtime)
    # Internal kinds: a publication or a deletion is requested through the catalog's own
    # routes, which check the dataset and version first, never as a raw job.
    publish = app.pipeline(PUBLISH, steps=STEPS, keep_forever=True, api_scope=None)

    @publish.step("get_data")
    async def get_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await _get_data(runtime, ctx, _dataset_id(ctx, payload))

    @publish.step("persist_data")
    async def persist_data(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await _persist_data(runtime, ctx, _dataset_id(ctx, payload))

    @publish.compensate
    async def compensate(dead_letter: dict[str, Any]) -> None:
        await _compensate(runtime, dead_letter)

    @app.task(DELETE_VERSION, keep_forever=True, api_scope=None)
    async def delete_version(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await _delete_version(
            runtime, ctx, str(payload["dataset_id"]), int(payload["version"])
        )


def _dataset_id(ctx: JobContext, payload: dict[str, Any]) -> str:
    value = payload.get("dataset_id") or ctx.key
    if not isinstance(value, str) or not value:
        raise Permanent("a publication job needs the dataset id (payload dataset_id or key)")
    return value


async def _load(conn: AsyncConn, dataset_id: str) -> Dataset:
    dataset = await registry.get_dataset(conn, dataset_id)
    if dataset is None:
        raise Permanent(f"no dataset {dataset_id!r} is registered")
    return dataset


async def _get_data(runtime: CatalogRuntime, ctx: JobContext, dataset_id: str) -> dict[str, Any]:
    version = ctx.version
    async with runtime.connection() as conn:
        dataset = await _load(conn, dataset_id)
        if await registry.get_version(conn, dataset_id, version) is None:
            # Admitted by a schedule, which enqueues the job alone.
            await _create_version(conn, dataset_id, version, ctx.job_id)
        await registry.set_version_job(conn, dataset_id, version, ctx.job_id)
        record = await registry.get_version(conn, dataset_id, version)
        assert record is not None
        if record.state in ("requested", "exporting"):
            await registry.transition(conn, dataset_id, version, "exporting")
        elif record.state != "exported":  # exported: an attempt died before moving on
            raise Permanent(f"version {version} of {dataset_id!r} is {record.state}")

    total = _expected_records(dataset)
    heartbeat = _ThreadHeartbeat(ctx, runtime, dataset_id, total)
    runtime.notify(ProgressEvent(dataset_id, version, "get_data", 0, total))
    cancellation = Cancellation()
    try:
        result = await asyncio.to_thread(
            export_version,
            dataset,
            version,
            runtime.export_store,
            runtime.source_access,
            heartbeat.progress,
            cancellation,
        )
    except asyncio.CancelledError:
        # The attempt stopped (cancelled, timed out, lease lost). The thread cannot be
        # cancelled: it stops at its next progress report, before committing, so a later
        # attempt never meets this one's files; a source query it is waiting on is
        # cancelled on the server now (from a thread: that call blocks).
        heartbeat.stopped.set()
        threading.Thread(target=cancellation.cancel, name="source-cancel", daemon=True).start()
        raise
    produced = {
        "files": [f.to_dict() for f in result.files],
        "columns": result.columns,
        "record_count": result.record_count,
    }
    # Durable before anything else: a dead attempt's cleanup reads it.
    await ctx.save_checkpoint(produced)
    async with runtime.connection() as conn, conn.transaction():
        await registry.record_files(conn, dataset_id, version, result.files)
        await registry.transition(
            conn, dataset_id, version, "exported", record_count=result.record_count
        )
    return produced


def _expected_records(dataset: Dataset) -> int | None:
    count = dataset.source.get("count")
    return count if dataset.source.get("type") == "generated" and isinstance(count, int) else None


class ExportStopped(Exception):
    """Raised on the export thread to abort an export whose attempt has ended."""


class _ThreadHeartbeat:
    """The export's progress callback: runs on the export thread, relays to the loop."""

    def __init__(
        self, ctx: JobContext, runtime: CatalogRuntime, dataset_id: str, total: int | None
    ) -> None:
        self.ctx = ctx
        self.runtime = runtime
        self.dataset_id = dataset_id
        self.total = total
        self.last_beat = time.monotonic()
        self.stopped = threading.Event()

    def progress(self, done: int) -> None:
        ctx = self.ctx
        if self.stopped.is_set():
            raise ExportStopped(f"job {ctx.job_id}'s attempt {ctx.attempt} was stopped")
        event = ProgressEvent(self.dataset_id, ctx.version, "get_data", done, self.total)
        ctx.loop.call_soon_threadsafe(self.runtime.notify, event)
        if time.monotonic() - self.last_beat >= HEARTBEAT_EVERY:
            self.last_beat = time.monotonic()
            # Blocks this thread until the lease is extended; LeaseLost aborts the
            # export, which then leaves no file visible.
            asyncio.run_coroutine_threadsafe(ctx.heartbeat(), ctx.loop).result(timeout=60)


async def _first_issued(conn: AsyncConn, dataset_id: str) -> dt.datetime | None:
    versions = await registry.list_versions(conn, dataset_id)
    published = [v.published_at for v in versions if v.published_at is not None]
    return min(published) if published else None


async def _persist_data(
    runtime: CatalogRuntime, ctx: JobContext, dataset_id: str
) -> dict[str, Any]:
    version = ctx.version
    produced = ctx.checkpoint
    files = [ExportedFile.from_dict(f) for f in produced.get("files", [])]
    if not files:
        raise Permanent("persist_data found no exported files in the checkpoint")
    result = ExportResult(
        list(produced.get("columns", [])), int(produced.get("record_count", 0)), files
    )
    notify = runtime.notify
    notify(ProgressEvent(dataset_id, version, "persist_data", 0, 3))
    async with runtime.connection() as conn:
        dataset = await _load(conn, dataset_id)
        now = await _db_now(conn)
        issued = await _first_issued(conn, dataset_id) or now
    try:
        entry = await asyncio.to_thread(
            build_entry, dataset, version, result, runtime.catalog.urls, issued, now
        )
    except MetadataRejected as exc:
        async with runtime.connection() as conn:
            await registry.transition(
                conn,
                dataset_id,
                version,
                "failed",
                validation=exc.report.to_dict(),
                error=exc.report.text(),
            )
        raise
    notify(ProgressEvent(dataset_id, version, "persist_data", 1, 3))
    # Recorded before the write: a dead attempt's cleanup then puts the entry back.
    await ctx.save_checkpoint({"entry_written": True})
    catalog_info = runtime.catalog.info()
    await asyncio.to_thread(
        write_entry, runtime.triple_store, runtime.catalog.urls, dataset_id, entry, catalog_info
    )
    notify(ProgressEvent(dataset_id, version, "persist_data", 2, 3))
    report = entry.report.to_dict()
    async with ctx.transaction({"version": version, "validation": report}) as conn:
        await registry.transition(
            conn, dataset_id, version, "published", validation=report, metadata=entry.turtle
        )
    notify(ProgressEvent(dataset_id, version, "persist_data", 3, 3, finished=True))
    return {"version": version, "validation": report}


async def _db_now(conn: AsyncConn) -> dt.datetime:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql.query("db_now"))
    row = await cur.fetchone()
    assert row is not None
    now: dt.datetime = row["now"]
    return now


# --- undoing ----------------------------------------------------------------------------


def _entry_version(store: TripleStore, graph: str) -> int | None:
    """The dcat:version of the entry the store holds in ``graph`` (None if empty)."""
    pattern = "{ ?d <http://www.w3.org/ns/dcat#version> ?v }"
    rows = store.select(f"SELECT ?v WHERE {{ GRAPH <{graph}> {pattern} }}")
    versions = [int(r["v"]) for r in rows if r.get("v", "").isdigit()]
    return max(versions) if versions else None


async def _restore_entry(runtime: CatalogRuntime, conn: AsyncConn, dataset_id: str) -> str:
    """Put the entry back to the highest published version, or remove it if none."""
    graph = runtime.catalog.urls.entry_graph(dataset_id)
    versions = await registry.list_versions(conn, dataset_id)  # highest first
    latest = next((v for v in versions if v.state == "published" and v.metadata), None)
    store = runtime.triple_store
    if latest is None or latest.metadata is None:
        await asyncio.to_thread(delete_entry, store, graph)
        return "removed"
    restored = Graph().parse(data=latest.metadata, format="turtle")
    await asyncio.to_thread(replace_entry, store, graph, restored)
    return f"restored to version {latest.version}"


async def _remove_files(
    runtime: CatalogRuntime, dataset_id: str, version: int, keys: list[str]
) -> None:
    store = runtime.export_store
    prefix = version_prefix(dataset_id, version)

    def remove() -> None:
        for key in dict.fromkeys([*keys, *store.list(prefix)]):
            store.delete(key)

    await asyncio.to_thread(remove)


async def _compensate(runtime: CatalogRuntime, dead_letter: dict[str, Any]) -> None:
    """Undo a dead publication attempt (idempotent; a published version is left alone)."""
    dataset_id = str(dead_letter.get("key") or (dead_letter.get("payload") or {}).get("dataset_id"))
    version = int(dead_letter["version"])
    produced: dict[str, Any] = dead_letter.get("cleanup") or {}
    async with runtime.connection() as conn:
        record = await registry.get_version(conn, dataset_id, version)
        if record is not None and record.state in ("published", "deleting", "deleted"):
            return
        keys = [str(f["key"]) for f in produced.get("files", [])]
        await _remove_files(runtime, dataset_id, version, keys)
        if record is not None:  # the version shows the failure even if the store is down
            async with conn.transaction():
                await registry.forget_files(conn, dataset_id, version)
                if record.active:
                    await registry.transition(
                        conn, dataset_id, version, "failed", error=_last_error(dead_letter)
                    )
        if produced.get("entry_written"):
            graph = runtime.catalog.urls.entry_graph(dataset_id)
            shown = await asyncio.to_thread(_entry_version, runtime.triple_store, graph)
            if shown == version:
                await _restore_entry(runtime, conn, dataset_id)


def _last_error(dead_letter: dict[str, Any]) -> str:
    errors = dead_letter.get("errors") or []
    if errors and isinstance(errors[-1], dict) and errors[-1].get("message"):
        return f"publication failed ({dead_letter.get('reason')}): {errors[-1]['message']}"
    return f"publication failed ({dead_letter.get('reason') or 'dead'})"


async def _delete_version(
    runtime: CatalogRuntime, ctx: JobContext, dataset_id: str, version: int
) -> dict[str, Any]:
    async with runtime.connection() as conn:
        record = await registry.get_version(conn, dataset_id, version)
        if record is None:
            raise Permanent(f"dataset {dataset_id!r} has no version {version}")
        if record.state == "deleted":
            return {"deleted": [], "entry": "unchanged"}
        if record.state != "deleting":
            # Only request_deletion moves a version to 'deleting' (with this job): a job
            # that meets any other state was not admitted by it and must touch nothing.
            raise Permanent(
                f"version {version} of {dataset_id!r} is {record.state}, not deleting: "
                "request its deletion through the catalog"
            )
        await _remove_files(runtime, dataset_id, version, [f.store_key for f in record.files])
        graph = runtime.catalog.urls.entry_graph(dataset_id)
        shown = await asyncio.to_thread(_entry_version, runtime.triple_store, graph)
        entry = "unchanged"
        if shown == version:  # the state is 'deleting' now: it is no longer a candidate
            entry = await _restore_entry(runtime, conn, dataset_id)
    outcome = {"deleted": [f.store_key for f in record.files], "entry": entry}
    async with ctx.transaction(outcome) as tx:
        await registry.forget_files(tx, dataset_id, version)
        await registry.transition(tx, dataset_id, version, "deleted")
    return outcome
