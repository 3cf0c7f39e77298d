"""The publication steps chained by hand: export, render and validate, store, remove."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path

import pytest
from rdflib import Graph, Literal, URIRef
from rdflib.namespace import DCTERMS, FOAF, XSD

from herald.catalog.datasets import Dataset
from herald.catalog.errors import ExportConflict
from herald.catalog.metadata import DCAT, SPDX, render_catalog
from herald.catalog.publishing import (
    CatalogSettings,
    MetadataRejected,
    build_entry,
    check_catalog,
    export_version,
    remove_version,
    verify_entry,
    write_entry,
)
from herald.catalog.source_access import SourceAccess
from herald.catalog.store import LocalExportStore
from herald.catalog.triplestore import OxigraphStore, export_catalog
from herald.catalog.validation import validate
from herald.config import Settings
from herald.errors import Permanent
from tests.catalog.official import official_reports
from tests.catalog.samples import BASIC_DATASET, BELGIUM, HIGH_DATASET

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
    graphs = [URLS.catalog_graph, URLS.entry_graph("measures")]
    catalog = Graph().parse(data=export_catalog(store, "turtle", graphs=graphs), format="turtle")
    dataset_node = URIRef(URLS.dataset("measures"))
    assert {str(v) for v in catalog.objects(dataset_node, DCAT.version)} == {"2"}
    distributions = set(catalog.objects(dataset_node, DCAT.distribution))
    assert len(distributions) == 3
    for node in distributions:  # the metadata describes the files as they are
        url = str(catalog.value(node, DCAT.downloadURL))
        key = "measures/v2/" + url.rsplit("/", 1)[-1]
        data = files.path(key).read_bytes()
        assert catalog.value(node, DCAT.byteSize) == Literal(
            str(len(data)), datatype=XSD.nonNegativeInteger
        )
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


def test_what_readers_get_from_the_store_is_what_is_validated(tmp_path: Path) -> None:
    """Oxigraph keeps every integer as xsd:integer: read back raw, a byte size lost the
    datatype DCAT-AP prescribes. Readers get it restored, and that is what is checked."""
    dataset = Dataset(HIGH_DATASET, {"type": "generated", "count": 10}, tier="high")
    store = OxigraphStore(tmp_path / "store")
    exports = LocalExportStore(tmp_path / "exports")
    result = export_version(dataset, 1, exports, SourceAccess(tmp_path))
    entry = build_entry(dataset, 1, result, URLS, T1, T1)
    belgium = dataclasses.replace(CATALOG, spatial=BELGIUM.uri)  # the catalog's coverage
    write_entry(store, URLS, "measures", entry, belgium.info(T1, T2))
    graph = URLS.entry_graph("measures")
    raw = store.construct(f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}")
    assert {o.datatype for o in raw.objects(None, DCAT.byteSize)} == {XSD.integer}  # type: ignore[attr-defined]
    assert not validate(raw, "high").conforms  # what the store holds, as it holds it
    assert verify_entry(store, URLS, "measures", "high").conforms  # what readers get
    served = Graph().parse(
        data=export_catalog(store, graphs=[URLS.catalog_graph, graph]), format="turtle"
    )
    for name, report in official_reports(served).items():
        assert report.findings == (), (name, report.text())
    store.close()


def test_a_retried_export_writes_its_own_files_beside_an_interrupted_attempts(
    tmp_path: Path,
) -> None:
    dataset = Dataset(BASIC_DATASET, {"type": "generated", "count": 100})
    files = LocalExportStore(tmp_path / "exports")
    upload = files.begin("measures/v1/job-7-fence-1/measures.json")  # attempt 1 got this far
    upload.write(b"[")
    upload.commit()
    result = export_version(dataset, 1, files, SourceAccess(tmp_path), attempt="job-7-fence-2")
    assert [f.record_count for f in result.files] == [100, 100, 100]
    assert files.size("measures/v1/job-7-fence-2/measures.json") == result.files[0].byte_size
    # An attempt never overwrites another's bytes: attempt 1's file is as it left it.
    with files.open("measures/v1/job-7-fence-1/measures.json") as earlier:
        assert earlier.read() == b"["
    with pytest.raises(ExportConflict, match="immutable"):
        export_version(dataset, 1, files, SourceAccess(tmp_path), attempt="job-7-fence-2")


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
    info = configured.info(T1, T2)
    assert info.publisher.name == "Open data"
    assert check_catalog(info, configured.urls).conforms
    # The catalog's own record: issued, modified, language, licence; a typed publisher
    # that is an agent of its own, not the catalog's homepage.
    described = render_catalog(info, configured.urls)
    node = URIRef(configured.urls.catalog)
    assert described.value(node, DCTERMS.issued) == Literal(T1.isoformat(), datatype=XSD.dateTime)
    assert described.value(node, DCTERMS.modified) == Literal(T2.isoformat(), datatype=XSD.dateTime)
    assert described.value(node, DCTERMS.language) == URIRef(
        "http://publications.europa.eu/resource/authority/language/ENG"
    )
    assert described.value(node, DCTERMS.license) == URIRef(
        "https://creativecommons.org/publicdomain/zero/1.0/"
    )
    publisher = described.value(node, DCTERMS.publisher)
    assert publisher == URIRef("https://open.example.org/v1/catalog#publisher")
    assert publisher != described.value(node, FOAF.homepage)
    assert described.value(publisher, DCTERMS.type) == URIRef(
        "http://purl.org/adms/publishertype/NonProfitOrganisation"
    )
    for name, report in official_reports(described).items():
        assert report.conforms, (name, report.text())
        # Recommended and missing here: datasets (this description has none yet) and
        # the area the catalog covers (left to the operator).
        assert {f.path for f in report.warnings} <= {None, "dct:spatial"}, report.text()
    typed = CatalogSettings.from_env(
        {**env, "HERALD_CATALOG_PUBLISHER_TYPE": "NationalAuthority"}
    ).info()
    assert typed.publisher.type is not None
    assert typed.publisher.type.label == "National authority"
    with pytest.raises(ValueError, match="three-letter"):
        CatalogSettings(language="English")
    with pytest.raises(ValueError, match="both SPARQL"):
        CatalogSettings(sparql_query_url="http://127.0.0.1:7878/query")
    local = CatalogSettings().open_triple_store(settings.with_(data_dir=tmp_path))
    assert isinstance(local, OxigraphStore)
    assert (tmp_path / "triplestore").is_dir()
    local.close()
