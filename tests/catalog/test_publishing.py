"""The publication steps chained by hand: export, render and validate, store, remove."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path

import pytest
from rdflib import Graph, URIRef

from herald.catalog.datasets import Dataset
from herald.catalog.metadata import DCAT, SPDX
from herald.catalog.publishing import (
    CatalogSettings,
    MetadataRejected,
    build_entry,
    check_catalog,
    export_version,
    remove_version,
    write_entry,
)
from herald.catalog.source_access import SourceAccess
from herald.catalog.store import LocalExportStore
from herald.catalog.triplestore import OxigraphStore, export_catalog
from herald.config import Settings
from herald.errors import Permanent
from tests.catalog.samples import BASIC_DATASET, HIGH_DATASET

CATALOG = CatalogSettings(public_url="https://data.example.org")
URLS = CATALOG.urls
T1 = dt.datetime(2025, 4, 1, 9, 0, tzinfo=dt.UTC)
T2 = dt.datetime(2025, 4, 2, 9, 0, tzinfo=dt.UTC)


def test_publish_two_versions_and_remove_the_first(tmp_path: Path) -> None:
    dataset = Dataset(HIGH_DATASET, {"type": "generated", "count": 2_500}, tier="high")
    files = LocalExportStore(tmp_path / "exports")
    store = OxigraphStore(tmp_path / "store")
    done: list[int] = []
    first = export_version(dataset, 1, files, SourceAccess(tmp_path), done.append)
    assert done[-1] == 2_500
    entry = build_entry(dataset, 1, first, URLS, T1, T1)
    assert entry.report.conforms and entry.report.findings == ()
    write_entry(store, URLS, "measures", entry, CATALOG.info())

    second = export_version(dataset, 2, files, SourceAccess(tmp_path))
    write_entry(
        store, URLS, "measures", build_entry(dataset, 2, second, URLS, T1, T2), CATALOG.info()
    )
    catalog = Graph().parse(data=export_catalog(store, "turtle"), format="turtle")
    dataset_node = URIRef(URLS.dataset("measures"))
    assert {str(v) for v in catalog.objects(dataset_node, DCAT.version)} == {"2"}
    distributions = set(catalog.objects(dataset_node, DCAT.distribution))
    assert len(distributions) == 3
    for node in distributions:  # the metadata describes the files as they are
        url = str(catalog.value(node, DCAT.downloadURL))
        key = "measures/v2/" + url.rsplit("/", 1)[-1]
        data = files.path(key).read_bytes()
        assert str(catalog.value(node, DCAT.byteSize)) == str(len(data))
        checksum = catalog.value(node, SPDX.checksum)
        value = str(catalog.value(checksum, SPDX.checksumValue))
        assert value == hashlib.sha256(data).hexdigest()
    assert files.list("measures/v1") == sorted(f.key for f in first.files)  # old version kept

    keys = [f.key for f in first.files]
    assert remove_version(files, keys) == keys
    assert remove_version(files, keys) == []  # idempotent
    assert files.list("measures/v1") == []
    remove_version(files, [], store, URLS.entry_graph("measures"))
    assert not store.ask(f"ASK {{ GRAPH <{URLS.entry_graph('measures')}> {{ ?s ?p ?o }} }}")
    store.close()


def test_a_retried_export_replaces_an_interrupted_attempts_files(tmp_path: Path) -> None:
    dataset = Dataset(BASIC_DATASET, {"type": "generated", "count": 100})
    files = LocalExportStore(tmp_path / "exports")
    upload = files.begin("measures/v1/measures.json")  # an earlier attempt got this far
    upload.write(b"[")
    upload.commit()
    result = export_version(dataset, 1, files, SourceAccess(tmp_path))
    assert [f.record_count for f in result.files] == [100, 100, 100]
    assert files.size("measures/v1/measures.json") == result.files[0].byte_size


def test_an_entry_missing_a_mandatory_property_is_rejected_for_good(tmp_path: Path) -> None:
    info = dataclasses.replace(BASIC_DATASET, title="")
    dataset = Dataset(info, {"type": "generated", "count": 10})
    result = export_version(dataset, 1, LocalExportStore(tmp_path), SourceAccess(tmp_path))
    with pytest.raises(MetadataRejected) as caught:
        build_entry(dataset, 1, result, URLS, T1, T1)
    assert isinstance(caught.value, Permanent)
    assert [(f.path, f.message) for f in caught.value.report.violations] == [
        ("dct:title", "A dataset needs a title (dct:title).")
    ]
    assert "does not conform to the basic tier" in str(caught.value)
    # The high tier asks more of the same metadata.
    high = Dataset(BASIC_DATASET, dataset.source, tier="high")
    with pytest.raises(MetadataRejected, match="keyword"):
        build_entry(high, 1, result, URLS, T1, T1)


def test_catalog_settings(settings: Settings, tmp_path: Path) -> None:
    env = {
        "HERALD_PUBLIC_URL": "https://open.example.org/",
        "HERALD_CATALOG_TITLE": "Open data",
        "HERALD_SPARQL_QUERY_URL": "http://127.0.0.1:7878/query",
        "HERALD_SPARQL_UPDATE_URL": "http://127.0.0.1:7878/update",
    }
    configured = CatalogSettings.from_env(env)
    assert configured.urls.catalog == "https://open.example.org/v1/catalog#catalog"
    assert configured.info().publisher.name == "Open data"
    assert check_catalog(configured.info(), configured.urls).conforms
    with pytest.raises(ValueError, match="both SPARQL"):
        CatalogSettings(sparql_query_url="http://127.0.0.1:7878/query")
    local = CatalogSettings().open_triple_store(settings.with_(data_dir=tmp_path))
    assert isinstance(local, OxigraphStore)
    assert (tmp_path / "triplestore").is_dir()
    local.close()
