"""Upgrade proof: a catalog written before versions became generations (schema as of
migration 0024, versions written the old way) migrates and serves the same catalog: the
same datasets, versions and downloads, and the same DCAT-AP plus the version links."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from rdflib import Graph, URIRef
from rdflib.namespace import RDF

from herald import Client, Herald, Settings, Worker
from herald.catalog import datasets as registry
from herald.catalog import entries
from herald.catalog.datasets import Dataset
from herald.catalog.metadata import DCAT, PROV
from herald.catalog.pipeline import (
    catalog_graphs,
    catalog_runtime,
    close_embedded_store,
    register_catalog,
    request_publication,
)
from herald.catalog.publishing import CatalogSettings, build_entry, export_version, write_entry
from herald.catalog.runtime import CatalogRuntime
from herald.catalog.triplestore import export_catalog
from herald.db import AsyncConn, connect, conninfo
from herald.migrate import migrate, pending
from tests.catalog.official import official_reports
from tests.catalog.samples import BASIC_DATASET, HIGH_DATASET
from tests.support import wait_for_job

BEFORE_GENERATIONS = 24  # the last migration number before versions became generations
CATALOG = CatalogSettings(public_url="https://data.example.org")
URLS = CATALOG.urls
HIGH = Dataset(HIGH_DATASET, {"type": "generated", "count": 30}, tier="high")
STATIONS = dataclasses.replace(BASIC_DATASET, id="stations", publisher=HIGH_DATASET.publisher)
BASIC = Dataset(STATIONS, {"type": "generated", "count": 5})
T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)
_JOB_IDS = itertools.count(1001)  # the publication jobs the released pipeline ran


@pytest.fixture
async def old_schema(
    database: str, schema_name: str, tmp_path: Path
) -> AsyncIterator[tuple[AsyncConn, Settings]]:
    conn = await connect(conninfo(database, schema_name))
    try:
        await migrate(conn, schema_name, upto=BEFORE_GENERATIONS)
        yield conn, Settings(database_url=database, schema=schema_name, data_dir=tmp_path)
    finally:
        await conn.execute(
            psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                psycopg.sql.Identifier(schema_name)
            )
        )
        await conn.close()


async def _publish_the_old_way(
    conn: AsyncConn, runtime: CatalogRuntime, dataset: Dataset, version: int, at: dt.datetime
) -> None:
    """What the released pipeline did: files under <id>/v<n>/, the version's row, the entry
    of that version alone (its Turtle kept on the row) replacing the dataset's."""
    result = export_version(dataset, version, runtime.export_store, runtime.source_access)
    await conn.execute(
        "INSERT INTO dataset_versions (dataset_id, version, job_id, state, record_count, "
        "validation, metadata, created_at, published_at) "
        "VALUES (%s, %s, %s, 'published', %s, '{}', '', %s, %s)",
        (dataset.id, version, next(_JOB_IDS), result.record_count, at, at),
    )
    await conn.execute(
        "UPDATE datasets SET next_version = %s WHERE id = %s", (version + 1, dataset.id)
    )
    await conn.execute(  # the engine numbered the version's job
        "INSERT INTO key_versions (kind, key, last_version) VALUES ('catalog.publish', %s, %s) "
        "ON CONFLICT (tenant_id, kind, key) DO UPDATE SET last_version = excluded.last_version",
        (dataset.id, version),
    )
    await registry.record_files(conn, dataset.id, version, result.files)
    published = await registry.list_versions(conn, dataset.id)
    issued = min(v.published_at for v in published if v.published_at is not None)
    stored = next(v for v in published if v.version == version)  # times as the database has them
    assert stored.published_at is not None
    entry = build_entry(dataset, version, result, URLS, issued, stored.published_at)
    write_entry(runtime.triple_store, URLS, dataset.id, entry, CATALOG.info(issued, issued))
    await conn.execute(
        "UPDATE dataset_versions SET metadata = %s WHERE dataset_id = %s AND version = %s",
        (entry.turtle, dataset.id, version),
    )


async def _served(conn: AsyncConn, runtime: CatalogRuntime) -> Graph:
    graphs = await catalog_graphs(conn, URLS)
    return Graph().parse(data=export_catalog(runtime.triple_store, graphs=graphs), format="turtle")


async def _catalog_state(conn: AsyncConn, runtime: CatalogRuntime) -> dict[str, Any]:
    """Datasets, versions and the bytes of every download, as readers would get them."""
    state: dict[str, Any] = {}
    for dataset in await registry.list_datasets(conn):
        shown = []
        for v in await registry.list_versions(conn, dataset.id):
            files = {}
            for f in v.files:
                with runtime.export_store.open(f.store_key) as handle:
                    files[f.name] = (f.format, f.sha256, handle.read())
            shown.append((v.version, str(v.state), v.record_count, v.published_at, files))
        state[dataset.id] = (dataset.info, shown)
    return state


async def test_a_catalog_from_before_generations_migrates_and_serves_the_same_catalog(
    old_schema: tuple[AsyncConn, Settings],
) -> None:
    conn, settings = old_schema
    assert [m.version for m in await pending(conn) if m.version in (25, 26)] == [25, 26]
    app = Herald()
    register_catalog(app, settings, CATALOG)
    runtime = catalog_runtime(app)
    try:
        for dataset in (HIGH, BASIC):
            await registry.register_dataset(conn, dataset)
        await _publish_the_old_way(conn, runtime, HIGH, 1, T0)
        await conn.execute(  # a version that failed: it never becomes a generation
            "INSERT INTO dataset_versions (dataset_id, version, job_id, state, error) "
            "VALUES ('measures', 2, 1000, 'failed', 'source unreachable')"
        )
        await _publish_the_old_way(conn, runtime, HIGH, 3, T0 + dt.timedelta(days=1))
        await _publish_the_old_way(conn, runtime, BASIC, 1, T0 + dt.timedelta(days=2))
        before = await _catalog_state(conn, runtime)
        served_before = await _served(conn, runtime)

        await migrate(conn, settings.schema)
        assert await pending(conn) == []
        assert await entries.refresh_outdated(runtime) == 2
        assert await entries.refresh_outdated(runtime) == 0  # marks cleared

        assert await _catalog_state(conn, runtime) == before  # datasets, versions, bytes
        served = await _served(conn, runtime)
        assert set(served_before) - set(served) == set()  # nothing lost or changed
        added = set(served) - set(served_before)
        node = URIRef(URLS.dataset("measures"))
        v1, v3 = (URIRef(URLS.version_dataset("measures", n)) for n in (1, 3))
        assert {(node, DCAT.hasVersion, v1), (node, DCAT.hasVersion, v3)} <= added
        assert (node, DCAT.hasCurrentVersion, v3) in added
        assert (v3, DCAT.previousVersion, v1) in added
        assert URIRef(URLS.version_dataset("measures", 2)) not in set(served.subjects())
        assert all(
            (activity, RDF.type, PROV.Activity) in served
            for activity in served.objects(None, PROV.wasGeneratedBy)
        )
        for name, report in official_reports(served).items():
            assert report.conforms, (name, report.text())

        # The versions are the generations they were, in order, under one pointer each.
        cur = await conn.execute(
            "SELECT v.dataset_id, v.version, v.generation, p.change, c.generation AS pointer "
            "FROM dataset_versions v LEFT JOIN gen_publications p "
            "  ON p.partition = v.dataset_id AND p.generation = v.generation "
            "LEFT JOIN gen_current c ON c.partition = v.dataset_id "
            "ORDER BY v.dataset_id, v.version"
        )
        assert [tuple(r.values()) for r in await cur.fetchall()] == [
            ("measures", 1, 1, "new", 2),
            ("measures", 2, None, None, 2),
            ("measures", 3, 2, "correction", 2),
            ("stations", 1, 1, "new", 1),
        ]

        # Publishing goes on from there: version 4 is generation 3, after version 3.
        client = await Client.open(app, settings)
        worker = Worker(app, settings=settings.with_(lease=5.0, poll_interval=0.2))
        running = asyncio.create_task(worker.run())
        try:
            admitted = await request_publication(client, "measures")
            assert (await wait_for_job(client, admitted.id, limit=60))["state"] == "succeeded"
        finally:
            worker.stop()
            await running
            await client.close()
        latest = await registry.get_version(conn, "measures", 4)
        assert latest is not None and latest.generation == 3
        served = await _served(conn, runtime)
        v4 = URIRef(URLS.version_dataset("measures", 4))
        assert (node, DCAT.hasCurrentVersion, v4) in served
        assert (v4, DCAT.previousVersion, v3) in served
    finally:
        close_embedded_store(settings)
