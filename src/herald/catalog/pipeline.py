"""The publication pipeline as Herald jobs: ``catalog.publish`` and ``catalog.delete_version``.

``catalog.publish`` (key = dataset id) runs ``get_data`` (export the records) then
``persist_data`` (render, validate, write and verify the DCAT-AP entry); the job's
version number *is* the dataset version (see :mod:`herald.catalog.admission`). Undoing
failed, cancelled and deleted versions is :mod:`herald.catalog.undo`; the application
also gets two housekeeping duties: ``catalog.reconcile`` and ``catalog.sweep``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from typing import Any

from herald import sql, tenancy
from herald.catalog import datasets as registry
from herald.catalog import entries, undo, versions
from herald.catalog.admission import (
    DELETE_VERSION,
    PUBLISH,
    create_version,
    recurrence_spec,
    request_deletion,
    request_publication,
    save_dataset,
)
from herald.catalog.datasets import Dataset, VersionState
from herald.catalog.errors import DataError
from herald.catalog.export import ExportedFile, ExportResult
from herald.catalog.metadata import CatalogUrls
from herald.catalog.publishing import (
    CatalogSettings,
    MetadataRejected,
    build_entry,
    export_version,
    verify_entry,
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
from herald.catalog.source_access import Cancellation
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn
from herald.errors import Permanent
from herald.generations.records import current_generation
from herald.registry import Herald
from herald.rows import MissingRow, one_row

__all__ = [
    "DELETE_VERSION",
    "PUBLISH",
    "CatalogRuntime",
    "ProgressEvent",
    "ProgressObserver",
    "catalog_graphs",
    "catalog_runtime",
    "close_embedded_store",
    "recurrence_spec",
    "register_catalog",
    "request_deletion",
    "request_publication",
    "save_dataset",
    "shared_triple_store",
]

log = logging.getLogger(__name__)

STEPS = ["get_data", "persist_data"]
HEARTBEAT_EVERY = 3.0  # seconds between lease heartbeats during an export
RECONCILE_EVERY = 10.0  # seconds between looks for cancelled publications to undo
SWEEP_EVERY = 600.0  # seconds between sweeps of the export store


# --- the jobs ---------------------------------------------------------------------------


def register_catalog(
    app: Herald, settings: Settings, catalog: CatalogSettings | None = None
) -> None:
    """Register ``catalog.publish`` and ``catalog.delete_version`` on ``app``.

    ``catalog`` defaults to :meth:`CatalogSettings.from_env`.
    """
    runtime = CatalogRuntime(settings, catalog or CatalogSettings.from_env())
    runtime.generations = versions.attach(app, settings, runtime.export_store)
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
        await undo.compensate(runtime, dead_letter)

    @app.task(DELETE_VERSION, keep_forever=True, api_scope=None)
    async def delete_version(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await undo.delete_version(
            runtime, ctx, str(payload["dataset_id"]), int(payload["version"])
        )

    @app.duty("catalog.reconcile", every=RECONCILE_EVERY)
    async def reconcile() -> None:
        await undo.reconcile(runtime)
        await entries.refresh_outdated(runtime)

    @app.duty("catalog.sweep", every=SWEEP_EVERY)
    async def sweep() -> None:
        await undo.sweep(runtime)


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
            await create_version(conn, dataset_id, version, ctx.job_id)
        await registry.set_version_job(conn, dataset_id, version, ctx.job_id)
        await versions.ensure_run(conn, dataset_id, version, ctx.job_id, dataset.source)
        record = await registry.get_version(conn, dataset_id, version)
        if record is None:  # created just above, in this transaction
            raise MissingRow(f"version {version} of {dataset_id!r} is not recorded")
        if record.state in (VersionState.REQUESTED, VersionState.EXPORTING):
            await registry.transition(conn, dataset_id, version, VersionState.EXPORTING)
        elif record.state != VersionState.EXPORTED:  # exported: an attempt died before moving on
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
            attempt=versions.attempt_folder(ctx.job_id, ctx.fence),
        )
    except asyncio.CancelledError:
        # The attempt stopped (cancelled, timed out, lease lost). The thread cannot be
        # cancelled: it stops at its next progress report, before committing, so a later
        # attempt never meets this one's files; a source query it is waiting on is
        # cancelled on the server now (from a thread: that call blocks).
        heartbeat.stopped.set()
        threading.Thread(target=cancellation.cancel, name="source-cancel", daemon=True).start()
        raise
    except DataError as exc:
        # The same records fail the same way on every attempt: fail now, and say where.
        await _fail(runtime, ctx, dataset_id, str(exc))
        raise Permanent(str(exc)) from None
    produced = {
        "files": [f.to_dict() for f in result.files],
        "columns": result.columns,
        "column_names": result.column_names(),
        "record_count": result.record_count,
        "progress": progress(result.record_count, result.record_count),
    }
    # Durable before anything else: a dead attempt's cleanup reads it.
    await ctx.save_checkpoint(produced)
    async with runtime.connection() as conn, conn.transaction():
        await registry.record_files(conn, dataset_id, version, result.files)
        await registry.transition(
            conn,
            dataset_id,
            version,
            VersionState.EXPORTED,
            record_count=result.record_count,
            columns=result.column_names(),
        )
    return produced


async def _fail(
    runtime: CatalogRuntime,
    ctx: JobContext,
    dataset_id: str,
    error: str,
    validation: dict[str, Any] | None = None,
) -> None:
    """Show the version failed at once (its job fails for good right after)."""
    await ctx.heartbeat()  # only while this attempt still holds the job (LeaseLost)
    async with runtime.connection() as conn, conn.transaction():
        await registry.transition(
            conn, dataset_id, ctx.version, VersionState.FAILED, validation=validation, error=error
        )
        await versions.abandon(conn, dataset_id, ctx.version, error)


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
            # Blocks this thread until the lease is extended and the progress saved (for
            # the version's status); LeaseLost aborts the export, which then leaves no
            # file visible.
            beat = self._beat(done)
            asyncio.run_coroutine_threadsafe(beat, ctx.loop).result(timeout=60)

    async def _beat(self, done: int) -> None:
        await self.ctx.heartbeat()
        await self.ctx.save_checkpoint({"progress": progress(done, self.total)})


def progress(done: int, total: int | None) -> dict[str, Any]:
    """An export's progress as its job's checkpoint keeps it (shown with the version)."""
    return {"records_done": done, "records_total": total}


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
        catalog_issued, now = await _publication_times(conn)
        issued = await versions.first_issued(conn, dataset_id) or now
        # the newest versions published before this one (which joins them)
        linked = runtime.catalog.linked_versions - 1
        history = await versions.history(conn, dataset_id, linked) if linked else []
        record = await registry.get_version(conn, dataset_id, version)
        if record is None or record.run_id is None:  # both recorded when the export began
            raise MissingRow(f"version {version} of {dataset_id!r} has no run recorded")
        generation = await current_generation(conn, versions.gen_dataset(), dataset_id) + 1
    this = versions.pending_version(
        version,
        generation,
        result.files,
        result.record_count,
        record.run_id,
        dataset.source,
        record.created_at,
        now,
    )
    try:
        entry = await asyncio.to_thread(
            build_entry,
            dataset,
            version,
            result,
            runtime.catalog.urls,
            issued,
            now,
            [*history, this],
        )
    except MetadataRejected as exc:
        await _fail(runtime, ctx, dataset_id, str(exc), exc.report.to_dict())
        raise
    notify(ProgressEvent(dataset_id, version, "persist_data", 1, 3))
    # Recorded before the write: a dead attempt's cleanup then puts the entry back.
    await ctx.save_checkpoint({"entry_written": True})
    catalog_info = runtime.catalog.info(issued=catalog_issued or now, modified=now)
    store, urls = runtime.triple_store, runtime.catalog.urls
    await asyncio.to_thread(write_entry, store, urls, dataset_id, entry, catalog_info)
    try:  # what readers get, not what was sent: the store may have changed it
        report = (
            await asyncio.to_thread(verify_entry, store, urls, dataset_id, dataset.tier)
        ).to_dict()
    except MetadataRejected as exc:  # the cleanup puts the previous entry back
        await _fail(runtime, ctx, dataset_id, str(exc), exc.report.to_dict())
        raise
    notify(ProgressEvent(dataset_id, version, "persist_data", 2, 3))
    gens = runtime.generations
    assert gens is not None
    async with ctx.transaction({"version": version, "validation": report}) as conn:
        # The files are this attempt's (from its checkpoint): recorded under its fence.
        await registry.record_files(conn, dataset_id, version, result.files)
        await versions.publish(
            gens,
            conn,
            ctx,
            dataset_id=dataset_id,
            version=version,
            run_id=record.run_id,
            files=result.files,
            record_count=result.record_count,
            validation=report,
            source=dataset.source,
        )
        await registry.transition(
            conn,
            dataset_id,
            version,
            VersionState.PUBLISHED,
            validation=report,
            metadata=entry.turtle,
        )
    notify(ProgressEvent(dataset_id, version, "persist_data", 3, 3, finished=True))
    return {"version": version, "validation": report}


async def _publication_times(conn: AsyncConn) -> tuple[dt.datetime | None, dt.datetime]:
    """The catalog's first publication (None before any) and the database's time now."""
    row = await one_row(conn, "catalog_first_publication")
    return row["issued"], row["now"]


async def catalog_graphs(conn: AsyncConn, urls: CatalogUrls) -> list[str]:
    """The named graphs the catalog consists of: its description and the entry of every
    dataset with a published version. Nothing else a (shared) store holds is shown."""
    cur = await conn.execute(sql.query("catalog_published_datasets"))
    ids = [row["dataset_id"] for row in await cur.fetchall()]
    return [urls.catalog_graph, *(urls.entry_graph(i) for i in ids)]


async def combined_catalog_graphs(
    conn: AsyncConn, urls: CatalogUrls
) -> tuple[list[str], list[str]]:
    """The tenants with published datasets, and the graphs the combined catalog consists
    of (each tenant's description, then every published entry): read for the platform,
    since it spans tenants, and only what is published."""
    with tenancy.platform():
        await tenancy.tell(conn)
        cur = await conn.execute(sql.query("catalog_published_by_tenant"))
        rows = await cur.fetchall()
    tenants = list(dict.fromkeys(row["tenant_id"] for row in rows))
    graphs = [urls.catalog_graph_of(t) for t in tenants]
    return tenants, graphs + [urls.entry_graph(row["dataset_id"]) for row in rows]
