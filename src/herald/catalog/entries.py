"""Describing a dataset's entry again from what the database holds.

Entries written before versions became generations describe the current version only.
After the migration (0026 marks their datasets ``entry_outdated``) the ``catalog.reconcile``
duty renders each again from its published versions, files and runs: the same
description, now with the DCAT 3 version links and the lineage of every version. It is
validated as readers get it before the mark is cleared. A deleted version is no longer
linked from the entry the same way (its deletion marks the entry).
"""

from __future__ import annotations

import asyncio
import logging

from herald import sql
from herald.catalog import datasets as registry
from herald.catalog import versions
from herald.catalog.export import ExportResult
from herald.catalog.publishing import build_entry, verify_entry
from herald.catalog.runtime import CatalogRuntime
from herald.catalog.triplestore import replace_entry
from herald.db import AsyncConn

log = logging.getLogger(__name__)


async def refresh_entry(runtime: CatalogRuntime, conn: AsyncConn, dataset_id: str) -> int | None:
    """Render, write and verify ``dataset_id``'s entry from the database; the version it
    shows (None: nothing published, nothing written)."""
    dataset = await registry.get_dataset(conn, dataset_id)
    history = await versions.history(conn, dataset_id, runtime.catalog.linked_versions)
    if dataset is None or not history:  # no entry to describe (a deletion removed it)
        await mark(conn, dataset_id, outdated=False)
        return None
    current = history[-1]
    issued = await versions.first_issued(conn, dataset_id) or current.published
    result = ExportResult([], current.record_count, list(current.files))
    urls, store = runtime.catalog.urls, runtime.triple_store
    entry = await asyncio.to_thread(
        build_entry, dataset, current.version, result, urls, issued, current.published, history
    )
    graph = urls.entry_graph(dataset_id)
    await asyncio.to_thread(replace_entry, store, graph, entry.graph)
    await asyncio.to_thread(verify_entry, store, urls, dataset_id, dataset.tier)
    await conn.execute(
        sql.query("catalog_entry_refreshed"),
        {"dataset_id": dataset_id, "version": current.version, "metadata": entry.turtle},
    )
    return current.version


async def mark(conn: AsyncConn, dataset_id: str, *, outdated: bool = True) -> None:
    """Have the entry described again by the next pass (or no longer)."""
    await conn.execute(
        sql.query("catalog_entry_mark"), {"dataset_id": dataset_id, "outdated": outdated}
    )


async def refresh_outdated(runtime: CatalogRuntime, limit: int = 20) -> int:
    """Describe again the entries marked outdated (a few per pass); how many were."""
    async with runtime.connection() as conn:
        cur = await conn.execute(sql.query("catalog_entries_outdated"), {"limit": limit})
        ids = [row["id"] for row in await cur.fetchall()]
        done = 0
        for dataset_id in ids:
            try:
                shown = await refresh_entry(runtime, conn, dataset_id)
            except Exception as exc:  # one bad entry must not stop the others
                log.warning("describing %s again failed: %s", dataset_id, exc)
                continue
            done += 1
            log.info("entry of %s described again with its versions (shows %s)", dataset_id, shown)
    return done
