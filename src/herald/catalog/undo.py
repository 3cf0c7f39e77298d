"""Undoing catalog work: a dead or cancelled publication, a deleted version, leftovers.

The catalog entry of a dataset always shows its highest published version. When that
version is deleted, or a failed attempt had already written its own entry, the entry is
put back to the highest version still published (from the Turtle stored on its row),
or removed when none is left.

A dead attempt is compensated by the cleanup runner from its dead letter; a cancelled
one (which leaves no dead letter) by the ``catalog.reconcile`` duty: the files of that
version are deleted, the entry is put back if the attempt wrote one, and the version is
marked failed. The ``catalog.sweep`` duty removes what killed writers left behind. All
of it is idempotent; a published version is never touched.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rdflib import Graph

from herald import sql
from herald.catalog import datasets as registry
from herald.catalog import entries, versions
from herald.catalog.datasets import VersionState
from herald.catalog.export import version_prefix
from herald.catalog.runtime import CatalogRuntime
from herald.catalog.triplestore import TripleStore, delete_entry, replace_entry
from herald.context import JobContext
from herald.db import AsyncConn
from herald.errors import Permanent

log = logging.getLogger(__name__)

PARTIAL_AGE = 3600.0  # an upload untouched this long was abandoned by a killed writer


def entry_version(store: TripleStore, graph: str) -> int | None:
    """The dcat:version of the entry the store holds in ``graph`` (None if empty)."""
    pattern = "{ ?d <http://www.w3.org/ns/dcat#version> ?v }"
    rows = store.select(f"SELECT ?v WHERE {{ GRAPH <{graph}> {pattern} }}")
    versions = [int(r["v"]) for r in rows if r.get("v", "").isdigit()]
    return max(versions) if versions else None


async def restore_entry(runtime: CatalogRuntime, conn: AsyncConn, dataset_id: str) -> str:
    """Put the entry back to the highest published version, or remove it if none."""
    graph = runtime.catalog.urls.entry_graph(dataset_id)
    versions = await registry.list_versions(conn, dataset_id)  # highest first
    latest = next((v for v in versions if v.state == VersionState.PUBLISHED and v.metadata), None)
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


async def compensate(runtime: CatalogRuntime, dead_letter: dict[str, Any]) -> None:
    """Undo a dead publication attempt (idempotent; a published version is left alone)."""
    dataset_id = str(dead_letter.get("key") or (dead_letter.get("payload") or {}).get("dataset_id"))
    version = int(dead_letter["version"])
    produced: dict[str, Any] = dead_letter.get("cleanup") or {}
    async with runtime.connection() as conn:
        record = await registry.get_version(conn, dataset_id, version)
        if record is not None and record.state in (
            VersionState.PUBLISHED,
            VersionState.DELETING,
            VersionState.DELETED,
        ):
            return
        keys = [str(f["key"]) for f in produced.get("files", [])]
        await _remove_files(runtime, dataset_id, version, keys)
        if record is not None:  # the version shows the failure even if the store is down
            async with conn.transaction():
                await registry.forget_files(conn, dataset_id, version)
                if record.active:
                    await registry.transition(
                        conn,
                        dataset_id,
                        version,
                        VersionState.FAILED,
                        error=_last_error(dead_letter),
                    )
                    await versions.abandon(conn, dataset_id, version, _last_error(dead_letter))
        if produced.get("entry_written"):
            graph = runtime.catalog.urls.entry_graph(dataset_id)
            shown = await asyncio.to_thread(entry_version, runtime.triple_store, graph)
            if shown == version:
                await restore_entry(runtime, conn, dataset_id)


def _last_error(dead_letter: dict[str, Any]) -> str:
    errors = dead_letter.get("errors") or []
    reason = dead_letter.get("reason") or "dead"
    lead = "publication cancelled" if reason == "cancelled" else f"publication failed ({reason})"
    if errors and isinstance(errors[-1], dict) and errors[-1].get("message"):
        return f"{lead}: {errors[-1]['message']}"
    return lead


async def reconcile(runtime: CatalogRuntime, limit: int = 100, grace: float | None = None) -> int:
    """Undo publications whose job ended without publishing and whose version still
    shows in flight: a cancelled job leaves no dead letter, so no cleanup would ever
    run for it. Dead ones are undone too if their cleanup has not run yet (both are
    idempotent). A job is left alone for ``grace`` seconds after it ended (default: a
    lease), by when a worker still running it has noticed. Returns how many versions
    were settled."""
    async with runtime.connection() as conn:
        cur = await conn.execute(
            sql.query("catalog_versions_abandoned"),
            {"grace_s": runtime.settings.lease if grace is None else grace, "limit": limit},
        )
        rows = await cur.fetchall()
    for row in rows:
        await compensate(runtime, dict(row))
        log.info(
            "version %d of %s undone: its publication job %d was %s",
            row["version"],
            row["dataset_id"],
            row["job_id"],
            row["reason"],
        )
    return len(rows)


async def sweep(runtime: CatalogRuntime) -> int:
    """Remove what no version may keep: uploads abandoned by killed writers, files of
    versions that failed or were deleted (a writer that lost its lease may still have
    committed one after the cleanup), and the files of a published version's attempts
    that never registered them. Returns how many files were removed."""
    store = runtime.export_store
    removed = await asyncio.to_thread(store.sweep_partials, PARTIAL_AGE)
    async with runtime.connection() as conn:
        cur = await conn.execute(sql.query("catalog_versions_settled"))
        settled = [(row["dataset_id"], row["version"]) for row in await cur.fetchall()]
        cur = await conn.execute(sql.query("catalog_versions_published_recent"))
        published = [(r["dataset_id"], r["version"], set(r["keys"])) for r in await cur.fetchall()]

    def leftovers() -> int:
        gone = 0
        for dataset_id, version in settled:
            for key in store.list(version_prefix(dataset_id, version)):
                gone += store.delete(key)
        # Attempts of a published version that never registered their files (a retry
        # published its own): no candidate can name them any more, readers never saw them.
        for dataset_id, version, kept in published:
            for key in store.list(version_prefix(dataset_id, version)):
                if key not in kept:
                    gone += store.delete(key)
        return gone

    removed += await asyncio.to_thread(leftovers)
    if removed:
        log.info("catalog sweep removed %d abandoned file(s)", removed)
    return removed


async def delete_version(
    runtime: CatalogRuntime, ctx: JobContext, dataset_id: str, version: int
) -> dict[str, Any]:
    async with runtime.connection() as conn:
        record = await registry.get_version(conn, dataset_id, version)
        if record is None:
            raise Permanent(f"dataset {dataset_id!r} has no version {version}")
        if record.state == VersionState.DELETED:
            return {"deleted": [], "entry": "unchanged"}
        if record.state != VersionState.DELETING:
            # Only request_deletion moves a version to 'deleting' (with this job): a job
            # that meets any other state was not admitted by it and must touch nothing.
            raise Permanent(
                f"version {version} of {dataset_id!r} is {record.state}, not deleting: "
                "request its deletion through the catalog"
            )
        await _remove_files(runtime, dataset_id, version, [f.store_key for f in record.files])
        graph = runtime.catalog.urls.entry_graph(dataset_id)
        shown = await asyncio.to_thread(entry_version, runtime.triple_store, graph)
        entry = "unchanged"
        if shown == version:  # the state is 'deleting' now: it is no longer a candidate
            entry = await restore_entry(runtime, conn, dataset_id)
    outcome = {"deleted": [f.store_key for f in record.files], "entry": entry}
    async with ctx.transaction(outcome) as tx:
        await registry.forget_files(tx, dataset_id, version)
        await registry.transition(tx, dataset_id, version, VersionState.DELETED)
        # The entry still links the deleted version: describe it again (the duty
        # does, should this process stop before it has).
        await entries.mark(tx, dataset_id)
    try:
        async with runtime.connection() as conn:
            await entries.refresh_entry(runtime, conn, dataset_id)
    except Exception as exc:  # left marked: the catalog.reconcile duty retries it
        log.warning("describing %s again after a deletion failed: %s", dataset_id, exc)
    return outcome
