"""The publication pipeline run by real workers: versions, failures, cleanup, deletion."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from herald import Client, Herald, Outcome, Settings, Worker
from herald.catalog import datasets as registry
from herald.catalog import pipeline, undo
from herald.catalog.datasets import Dataset, UnknownDataset, VersionState
from herald.catalog.errors import CatalogError
from herald.catalog.pipeline import (
    catalog_runtime,
    close_embedded_store,
    register_catalog,
    request_deletion,
    request_publication,
)
from herald.catalog.publishing import CatalogSettings, export_version
from herald.catalog.store import LocalExportStore
from herald.catalog.triplestore import TripleStore
from herald.catalog.undo import PARTIAL_AGE
from herald.client import open_connection
from herald.db import Row
from herald.ops.cleanup import CleanupRunner
from herald.ops.housekeeping import Housekeeper
from herald.ops.jobs import cancel
from tests.catalog.samples import HIGH_DATASET
from tests.support import wait_for_job

CATALOG = CatalogSettings(public_url="https://data.example.org")
DATASET_ID = HIGH_DATASET.id
ENTRY = CATALOG.urls.entry_graph(DATASET_ID)


@dataclass
class Catalog:
    app: Herald
    settings: Settings
    client: Client
    files: LocalExportStore

    @property
    def store(self) -> TripleStore:
        return catalog_runtime(self.app).triple_store

    async def register(self, dataset: Dataset) -> None:
        async with self.client.pool.connection() as conn:
            await registry.register_dataset(conn, dataset)

    async def run_until_finished(self, job_id: int) -> Row:
        """Run an in-process worker until the job is terminal; its row."""
        worker = Worker(self.app, settings=self.settings, concurrency=2)
        running = asyncio.create_task(worker.run())
        try:
            return await wait_for_job(self.client, job_id, limit=60)
        finally:
            worker.stop()
            await running

    async def version(self, version: int) -> registry.VersionRecord:
        async with self.client.pool.connection() as conn:
            record = await registry.get_version(conn, DATASET_ID, version)
        assert record is not None
        return record

    def entry_versions(self) -> list[str]:
        rows = self.store.select(
            f"SELECT ?v WHERE {{ GRAPH <{ENTRY}> "
            f"{{ <{ENTRY}#dataset> <http://www.w3.org/ns/dcat#version> ?v }} }}"
        )
        return sorted(r["v"] for r in rows)


@asynccontextmanager
async def open_catalog(
    settings: Settings, tmp_path: Path, presented: CatalogSettings = CATALOG
) -> AsyncIterator[Catalog]:
    """The catalog application on ``settings``' database, its files under ``tmp_path``."""
    local = settings.with_(data_dir=tmp_path)
    app = Herald()
    register_catalog(app, local, presented)
    client = await Client.open(app, local)
    try:
        yield Catalog(app, local, client, LocalExportStore.for_settings(local))
    finally:
        await client.close()
        close_embedded_store(local)


@pytest.fixture
async def catalog(settings: Settings, tmp_path: Path) -> AsyncIterator[Catalog]:
    async with open_catalog(settings, tmp_path) as found:
        yield found


def dataset(count: int = 1_500, **changes: Any) -> Dataset:
    info = dataclasses.replace(HIGH_DATASET, **changes)
    return Dataset(info, {"type": "generated", "count": count}, tier="high")


async def test_republish_keeps_the_old_version(catalog: Catalog) -> None:
    await catalog.register(dataset())
    first = await request_publication(catalog.client, DATASET_ID)
    again = await request_publication(catalog.client, DATASET_ID)
    assert (first.outcome, first.version) == (Outcome.CREATED, 1)
    assert (again.outcome, again.id) == (Outcome.IN_PROGRESS, first.id)
    with pytest.raises(UnknownDataset):
        await request_publication(catalog.client, "nowhere")
    assert (await catalog.run_until_finished(first.id))["state"] == "succeeded"
    v1 = await catalog.version(1)
    assert v1.state == "published" and v1.job_id == first.id
    assert sorted(f.format for f in v1.files) == ["csv", "json", "xml"]
    assert catalog.entry_versions() == ["1"]

    # Admitted the way a schedule admits it: the job alone; get_data records the version.
    second = await catalog.client.enqueue("catalog.publish", key=DATASET_ID)
    assert (second.outcome, second.version) == (Outcome.CREATED, 2)
    assert (await catalog.run_until_finished(second.id))["state"] == "succeeded"
    v2 = await catalog.version(2)
    assert (v2.state, v2.job_id) == ("published", second.id)
    kept = await catalog.version(1)
    assert kept.state == "published" and len(kept.files) == 3
    for file in kept.files:  # v1's files are still there, unchanged
        assert catalog.files.exists(file.store_key)
        assert catalog.files.size(file.store_key) == file.byte_size
    assert catalog.entry_versions() == ["2"]  # exactly one entry, the new version
    async with catalog.client.pool.connection() as conn:
        versions = await registry.list_versions(conn, DATASET_ID)
    assert [(v.version, v.state) for v in versions] == [(2, "published"), (1, "published")]


async def test_rejected_metadata_fails_at_once_and_cleanup_removes_the_files(
    catalog: Catalog,
) -> None:
    await catalog.register(dataset())
    good = await request_publication(catalog.client, DATASET_ID)
    assert (await catalog.run_until_finished(good.id))["state"] == "succeeded"
    await catalog.register(dataset(keywords=()))  # the high tier needs a keyword
    bad = await request_publication(catalog.client, DATASET_ID)
    job = await catalog.run_until_finished(bad.id)

    # Permanent at the first attempt, in persist_data, with a readable report.
    assert (job["state"], job["attempt"], job["step"]) == ("dead", 1, "persist_data")
    message = job["errors"][-1]["message"]
    assert "does not conform to the high tier" in message and "keyword" in message
    failed = await catalog.version(2)
    assert failed.state == "failed" and failed.error is not None
    assert "dcat:keyword" in failed.error
    assert failed.validation is not None and failed.validation["conforms"] is False
    paths = {f["path"] for f in failed.validation["findings"]}
    assert "dcat:keyword" in paths

    # The failure record lists what the attempt produced ...
    dead = await catalog.client.list_dead(key=DATASET_ID)
    assert [d.job_id for d in dead] == [bad.id]
    async with catalog.client.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT cleanup, cleanup_state FROM dead_letters WHERE job_id = %s", (bad.id,)
        )
        letter = await cur.fetchone()
    assert letter is not None and letter["cleanup_state"] == "pending"
    produced = sorted(f["key"] for f in letter["cleanup"]["files"])
    folder = f"{DATASET_ID}/v2/job-{bad.id}-fence-1"  # the attempt's own folder
    assert produced == [f"{folder}/{DATASET_ID}.{ext}" for ext in ("csv", "json", "xml")]
    assert all(catalog.files.exists(key) for key in produced)

    # ... and the cleanup runner removes exactly those files, once and for all.
    runner = CleanupRunner(catalog.app, catalog.client.pool)
    assert await runner.run_once() == 1
    assert runner.stats.done == 1
    assert catalog.files.list(f"{DATASET_ID}/v2") == []
    assert len(catalog.files.list(f"{DATASET_ID}/v1")) == 3
    assert (await catalog.version(2)).files == ()
    assert (await catalog.version(1)).state == "published"
    assert catalog.entry_versions() == ["1"]  # the published entry was never touched
    assert await runner.run_once() == 0


async def test_a_dead_attempt_that_wrote_its_entry_is_undone(catalog: Catalog) -> None:
    # persist_data fails after get_data and after its entry write: the transaction that
    # marks the version published is refused (the version was taken out from under it).
    await catalog.register(dataset())
    first = await request_publication(catalog.client, DATASET_ID)
    assert (await catalog.run_until_finished(first.id))["state"] == "succeeded"
    second = await request_publication(catalog.client, DATASET_ID)
    # a schema change: the migrating role's (Herald's runtime role owns no table)
    async with await open_connection(catalog.settings) as conn:
        await conn.execute(
            "ALTER TABLE dataset_versions ADD CONSTRAINT no_v2 "
            "CHECK (version <> 2 OR state <> 'published')"
        )
        await conn.execute("UPDATE jobs SET max_attempts = 1 WHERE id = %s", (second.id,))
    job = await catalog.run_until_finished(second.id)
    assert (job["state"], job["step"]) == ("dead", "persist_data")
    assert catalog.entry_versions() == ["2"]  # written before the refusal
    runner = CleanupRunner(catalog.app, catalog.client.pool)
    assert await runner.run_once() == 1 and runner.stats.done == 1
    assert catalog.entry_versions() == ["1"]  # back to the published version
    assert catalog.files.list(f"{DATASET_ID}/v2") == []
    undone = await catalog.version(2)
    assert undone.state == "failed" and undone.error and "no_v2" in undone.error
    # A new publication takes the next number; the failed one is not reused.
    third = await request_publication(catalog.client, DATASET_ID)
    assert third.version == 3


async def test_deleting_versions_removes_files_and_entry(catalog: Catalog) -> None:
    await catalog.register(dataset())
    for expected in (1, 2):
        admitted = await request_publication(catalog.client, DATASET_ID)
        assert admitted.version == expected
        assert (await catalog.run_until_finished(admitted.id))["state"] == "succeeded"
    v2_keys = [f.store_key for f in (await catalog.version(2)).files]

    deletion = await request_deletion(catalog.client, DATASET_ID, 2)
    assert (await catalog.version(2)).state == "deleting"
    job = await catalog.run_until_finished(deletion.id)
    assert job["state"] == "succeeded"
    assert job["result"] == {"deleted": sorted(v2_keys), "entry": "restored to version 1"}
    gone = await catalog.version(2)
    assert gone.state == "deleted" and gone.deleted_at is not None and gone.files == ()
    assert not any(catalog.files.exists(key) for key in v2_keys)
    assert catalog.entry_versions() == ["1"]

    last = await request_deletion(catalog.client, DATASET_ID, 1)
    assert (await catalog.run_until_finished(last.id))["result"]["entry"] == "removed"
    assert catalog.entry_versions() == []
    assert catalog.files.list(DATASET_ID) == []
    with pytest.raises(CatalogError, match="already deleted"):
        await request_deletion(catalog.client, DATASET_ID, 1)
    with pytest.raises(registry.UnknownVersion):
        await request_deletion(catalog.client, DATASET_ID, 7)


async def test_an_unreachable_triple_store_fails_persist_data_after_get_data(
    settings: Settings, tmp_path: Path
) -> None:
    local = settings.with_(data_dir=tmp_path)
    closed = "http://127.0.0.1:9"  # nothing listens on the discard port
    unreachable = CatalogSettings(
        public_url="https://data.example.org",
        sparql_query_url=f"{closed}/query",
        sparql_update_url=f"{closed}/update",
    )
    app = Herald()
    register_catalog(app, local, unreachable)
    async with await Client.open(app, local) as client:
        catalog = Catalog(app, local, client, LocalExportStore.for_settings(local))
        await catalog.register(dataset())
        admitted = await request_publication(client, DATASET_ID)
        async with client.pool.connection() as conn:  # one attempt, to keep it short
            await conn.execute("UPDATE jobs SET max_attempts = 1 WHERE id = %s", (admitted.id,))
        job = await catalog.run_until_finished(admitted.id)
        assert (job["state"], job["step"]) == ("dead", "persist_data")
        assert "127.0.0.1:9" in job["errors"][-1]["message"]
        produced = catalog.files.list(f"{DATASET_ID}/v1")
        assert len(produced) == 3  # get_data finished: its files are complete and visible

        runner = CleanupRunner(app, client.pool)
        assert await runner.run_once() == 1
        assert catalog.files.list(DATASET_ID) == []  # that attempt's files are gone
        failed = await catalog.version(1)
        assert failed.state == "failed" and failed.files == ()
        assert failed.error is not None and "127.0.0.1:9" in failed.error
        # Its entry may have been written before the store went away: the cleanup keeps
        # the record pending, with the error, until the store answers again.
        assert runner.stats.failed == 1
        async with client.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT cleanup_state, cleanup_last_error FROM dead_letters WHERE job_id = %s",
                (admitted.id,),
            )
            letter = await cur.fetchone()
        assert letter is not None and letter["cleanup_state"] == "pending"
        assert "127.0.0.1:9" in letter["cleanup_last_error"]


async def test_a_bad_record_fails_the_publication_at_once_naming_record_and_column(
    catalog: Catalog, tmp_path: Path
) -> None:
    sources = catalog.settings.data_dir / "sources"  # where file sources are read from
    sources.mkdir(exist_ok=True)
    (sources / "stations.csv").write_text("station,no2\nBrussels,31.5\nGhent\n", "utf-8")
    bad = Dataset(HIGH_DATASET, {"type": "csv", "path": "stations.csv"}, tier="high")
    await catalog.register(bad)
    admitted = await request_publication(catalog.client, DATASET_ID)
    job = await catalog.run_until_finished(admitted.id)
    # Permanent at once: one attempt (one read of the source), not three.
    assert (job["state"], job["attempt"]) == ("dead", 1)
    expected = "CSV file stations.csv: record 2 (line 3): 1 values for 2 columns"
    assert job["errors"][-1]["message"].endswith(expected)
    failed = await catalog.version(1)
    assert failed.state == "failed" and failed.error == expected
    assert catalog.files.list(f"{DATASET_ID}/v1") == []


async def test_an_export_shows_its_progress_while_it_runs(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export is held where the test says: once its progress at 20,000 records is
    saved, its thread waits until the test has read the version."""
    monkeypatch.setattr(pipeline, "HEARTBEAT_EVERY", 0.0)  # save progress at every report
    held, release = asyncio.Event(), asyncio.Event()
    beat = pipeline._ThreadHeartbeat._beat

    async def holding(self: pipeline._ThreadHeartbeat, done: int) -> None:
        await beat(self, done)
        if done == 20_000:
            held.set()
            await release.wait()

    monkeypatch.setattr(pipeline._ThreadHeartbeat, "_beat", holding)
    await catalog.register(dataset(count=60_000))
    admitted = await request_publication(catalog.client, DATASET_ID)
    worker = Worker(catalog.app, settings=catalog.settings, concurrency=1)
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(held.wait(), 60)
        record = await catalog.version(1)
        assert (record.status, record.job_step) == ("exporting", "get_data")
        assert record.progress == {"records_done": 20_000, "records_total": 60_000}
        release.set()
        job = await wait_for_job(catalog.client, admitted.id, limit=60)
    finally:
        release.set()
        worker.stop()
        await running
    assert job is not None and job["state"] == "succeeded"
    done = await catalog.version(1)
    assert done.state == "published" and done.record_count == 60_000
    assert done.progress == {"records_done": 60_000, "records_total": 60_000}


async def test_the_catalog_duties_undo_what_no_cleanup_would(
    catalog: Catalog, settings: Settings
) -> None:
    await catalog.register(dataset(count=100))
    admitted = await request_publication(catalog.client, DATASET_ID)
    # A killed writer's upload, and the files of a version whose job was cancelled
    # while it ran (written here as get_data would have written them).
    partial = catalog.files.path(f"{DATASET_ID}/v9/{DATASET_ID}.csv")
    partial.parent.mkdir(parents=True)
    partial = partial.with_name(f".{partial.name}.0123abcd.part")  # as an upload names it
    partial.write_bytes(b"id\n1\n")
    old = time.time() - 2 * PARTIAL_AGE
    os.utime(partial, (old, old))
    runtime = catalog_runtime(catalog.app)
    produced = export_version((await _stored(catalog)), 1, catalog.files, runtime.source_access)
    async with catalog.client.pool.connection() as conn:
        await registry.record_files(conn, DATASET_ID, 1, produced.files)
        await registry.transition(conn, DATASET_ID, 1, VersionState.EXPORTING)
    await cancel(catalog.client.pool, admitted.id, actor="tester", reason="wrong source")
    record = await catalog.version(1)
    assert (record.state, record.status) == ("exporting", "failed")  # shown at once

    keeper = Housekeeper(catalog.app, settings, catalog.client.pool)
    assert {d.name for d in keeper.duties} >= {"catalog.reconcile", "catalog.sweep"}
    assert await undo.reconcile(runtime, grace=0) == 1
    settled = await catalog.version(1)
    assert settled.state == "failed" and settled.files == ()
    assert settled.error == "publication cancelled: cancelled by tester: wrong source"
    assert catalog.files.list(f"{DATASET_ID}/v1") == []
    assert await undo.sweep(runtime) == 1  # the partial upload
    assert not any(catalog.files.root.rglob(".*.part"))
    # A writer that lost its lease may still commit after the cleanup: swept too.
    late = catalog.files.begin(f"{DATASET_ID}/v1/{DATASET_ID}.json")
    late.write(b"[]")
    late.commit()
    assert await undo.sweep(runtime) == 1
    assert catalog.files.list(f"{DATASET_ID}/v1") == []


async def _stored(catalog: Catalog) -> Dataset:
    async with catalog.client.pool.connection() as conn:
        found = await registry.get_dataset(conn, DATASET_ID)
    assert found is not None
    return found
