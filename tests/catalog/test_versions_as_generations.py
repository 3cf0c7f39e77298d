"""The catalog's versions are generations: one partition per dataset, a run per version,
each attempt exporting to its own folder, publication by the coordinator, and the entry
linking the versions (DCAT 3) with their lineage (PROV-O)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from rdflib import Graph, Literal, URIRef
from rdflib.namespace import DCTERMS, RDF

from herald import Client, Herald, Settings
from herald.catalog import datasets as registry
from herald.catalog import undo, versions
from herald.catalog.metadata import ADMS, DCAT, PROV
from herald.catalog.pipeline import (
    catalog_runtime,
    close_embedded_store,
    register_catalog,
    request_deletion,
    request_publication,
)
from herald.catalog.publishing import CatalogSettings
from herald.catalog.store import LocalExportStore
from herald.catalog.triplestore import export_catalog
from herald.db import Row
from herald.errors import Retry
from herald.generations.rows import Candidate
from herald.rows import from_row
from tests.catalog.official import official_reports
from tests.catalog.test_pipeline import CATALOG, DATASET_ID, ENTRY, Catalog, dataset
from tests.catalog.test_pipeline import catalog as catalog  # the fixture

URLS = CATALOG.urls


async def _rows(catalog: Catalog, query: str, *params: Any) -> list[Row]:
    async with catalog.client.pool.connection() as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


def _served(catalog: Catalog) -> Graph:
    text = export_catalog(catalog.store, graphs=[URLS.catalog_graph, ENTRY])
    return Graph().parse(data=text, format="turtle")


async def test_each_published_version_is_a_generation_linked_in_the_entry(
    catalog: Catalog,
) -> None:
    await catalog.register(dataset(count=50))
    jobs = []
    for _ in range(2):
        admitted = await request_publication(catalog.client, DATASET_ID)
        assert (await catalog.run_until_finished(admitted.id))["state"] == "succeeded"
        jobs.append(admitted.id)

    # The pointer of the dataset's partition names generation 2; each version is one.
    (pointer,) = await _rows(
        catalog,
        "SELECT c.generation, p.publication_id FROM gen_current c "
        "JOIN gen_publications p ON p.id = c.publication_id "
        "WHERE c.dataset = 'catalog' AND c.partition = %s",
        DATASET_ID,
    )
    assert pointer["generation"] == 2
    published = await _rows(
        catalog,
        "SELECT p.generation, p.change, c.location, c.job_id, c.fence, c.lineage "
        "FROM gen_publications p JOIN gen_candidates c ON c.id = p.candidate_id "
        "WHERE p.partition = %s ORDER BY p.generation",
        DATASET_ID,
    )
    assert [(p["generation"], p["change"]) for p in published] == [
        (1, "new"),
        (2, "correction"),
    ]
    for number, (row, job) in enumerate(zip(published, jobs, strict=True), start=1):
        # registered by the attempt holding the fence, from its own folder
        assert (row["job_id"], row["fence"]) == (job, 1)
        assert row["location"] == f"{DATASET_ID}/v{number}/job-{job}-fence-1"
        assert row["lineage"]["source"]["type"] == "generated"
        record = await catalog.version(number)
        assert (record.generation, record.state) == (number, "published")
        assert all(f.store_key.startswith(row["location"] + "/") for f in record.files)
    events = await _rows(
        catalog, "SELECT event_type FROM gen_outbox WHERE dataset = 'catalog' ORDER BY id"
    )
    assert [e["event_type"] for e in events] == ["generation.published", "generation.corrected"]

    graph = _served(catalog)
    node = URIRef(URLS.dataset(DATASET_ID))
    v1, v2 = (URIRef(URLS.version_dataset(DATASET_ID, n)) for n in (1, 2))
    assert set(graph.objects(node, DCAT.hasVersion)) == {v1, v2}
    assert graph.value(node, DCAT.hasCurrentVersion) == v2
    assert graph.value(node, DCAT.version) == Literal("2")
    assert graph.value(v2, DCAT.previousVersion) == v1
    assert graph.value(v1, DCAT.previousVersion) is None
    for number, vnode in ((1, v1), (2, v2)):
        assert graph.value(vnode, DCAT.isVersionOf) == node
        assert graph.value(vnode, DCAT.version) == Literal(str(number))
        notes = str(graph.value(vnode, ADMS.versionNotes))
        assert f"generation {number}" in notes and "50 records" in notes
        downloads = {
            str(graph.value(d, DCAT.downloadURL)) for d in graph.objects(vnode, DCAT.distribution)
        }
        assert downloads == {
            URLS.download(DATASET_ID, number, f"{DATASET_ID}.{ext}")
            for ext in ("csv", "json", "xml")
        }
        activity = graph.value(vnode, PROV.wasGeneratedBy)
        source = graph.value(vnode, DCTERMS.source)
        assert (activity, RDF.type, PROV.Activity) in graph
        assert (activity, PROV.used, source) in graph
        assert "generated sample records" in str(graph.value(source, DCTERMS.description))
    for name, report in official_reports(graph).items():  # what a reader gets
        assert report.conforms, (name, report.text())


async def test_a_retried_export_publishes_its_own_files_and_leaves_the_first_attempts(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 exports, then fails before its step ends; attempt 2 exports to a folder
    of its own, and its files are the ones registered, published and downloaded."""
    failed: list[int] = []
    record_files = registry.record_files

    async def fail_once(*args: Any) -> None:
        if not failed:
            failed.append(1)
            raise Retry("the database went away", delay=0.0)
        await record_files(*args)

    monkeypatch.setattr(registry, "record_files", fail_once)
    await catalog.register(dataset(count=20))
    admitted = await request_publication(catalog.client, DATASET_ID)
    job = await catalog.run_until_finished(admitted.id)
    assert (job["state"], job["attempt"]) == ("succeeded", 2)
    first = f"{DATASET_ID}/v1/job-{admitted.id}-fence-1"
    second = f"{DATASET_ID}/v1/job-{admitted.id}-fence-2"
    assert len(catalog.files.list(first)) == 3  # never overwritten, never registered
    record = await catalog.version(1)
    assert {f.store_key.rsplit("/", 1)[0] for f in record.files} == {second}
    (candidate,) = await _rows(
        catalog,
        "SELECT location, fence, state FROM gen_candidates WHERE partition = %s",
        DATASET_ID,
    )
    assert (candidate["location"], candidate["fence"], candidate["state"]) == (
        second,
        2,
        "published",
    )
    # The sweep removes the orphaned attempt's files, never the published ones.
    assert await undo.sweep(catalog_runtime(catalog.app)) == 3
    assert catalog.files.list(first) == [] and len(catalog.files.list(second)) == 3


async def test_a_candidate_whose_files_changed_is_not_published(catalog: Catalog) -> None:
    """The coordinator's pre-publication check re-reads the files of a catalog candidate."""
    await catalog.register(dataset(count=10))
    admitted = await request_publication(catalog.client, DATASET_ID)
    assert (await catalog.run_until_finished(admitted.id))["state"] == "succeeded"
    (row,) = await _rows(catalog, "SELECT * FROM gen_candidates")
    candidate = from_row(Candidate, row)
    assert versions.verify_candidate(catalog.files, candidate) == []
    key = candidate.lineage["files"][0]["key"]
    catalog.files.path(key).write_bytes(b"altered")
    failures = versions.verify_candidate(catalog.files, candidate)
    assert failures == [
        f"{candidate.lineage['files'][0]['name']}: the stored bytes differ from the "
        "registered SHA-256"
    ]


async def _publish(catalog: Catalog, times: int) -> None:
    for _ in range(times):
        admitted = await request_publication(catalog.client, DATASET_ID)
        assert (await catalog.run_until_finished(admitted.id))["state"] == "succeeded"


def _assert_linked(catalog: Catalog, older: int, current: int) -> None:
    """The entry links exactly versions ``older`` and ``current``, in that order."""
    graph = _served(catalog)
    node = URIRef(URLS.dataset(DATASET_ID))
    first, last = (URIRef(URLS.version_dataset(DATASET_ID, n)) for n in (older, current))
    assert set(graph.objects(node, DCAT.hasVersion)) == {first, last}
    assert graph.value(last, DCAT.previousVersion) == first
    assert graph.value(node, DCAT.hasCurrentVersion) == last


async def test_a_deleted_version_is_no_longer_linked_from_the_entry(catalog: Catalog) -> None:
    await catalog.register(dataset(count=10))
    await _publish(catalog, 3)
    deletion = await request_deletion(catalog.client, DATASET_ID, 2)
    assert (await catalog.run_until_finished(deletion.id))["state"] == "succeeded"
    _assert_linked(catalog, 1, 3)
    # The generation stays in the partition's history: publications are immutable.
    rows = await _rows(
        catalog, "SELECT generation FROM gen_current WHERE partition = %s", DATASET_ID
    )
    assert [r["generation"] for r in rows] == [3]


async def test_the_entry_links_the_newest_versions_only(settings: Settings, tmp_path: Path) -> None:
    """Rendering and validating an entry costs in proportion to its versions: it links
    at most HERALD_CATALOG_LINKED_VERSIONS of them, the newest."""
    local = settings.with_(data_dir=tmp_path)
    app = Herald()
    register_catalog(app, local, dataclasses.replace(CATALOG, linked_versions=2))
    client = await Client.open(app, local)
    try:
        two = Catalog(app, local, client, LocalExportStore.for_settings(local))
        await two.register(dataset(count=5))
        await _publish(two, 3)
        _assert_linked(two, 2, 3)
        assert (await two.version(1)).state == "published"  # still served for download
    finally:
        await client.close()
        close_embedded_store(local)
    with pytest.raises(ValueError, match="HERALD_CATALOG_LINKED_VERSIONS"):
        CatalogSettings.from_env({"HERALD_CATALOG_LINKED_VERSIONS": "0"})
