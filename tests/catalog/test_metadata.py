"""DCAT-AP rendering, checked against the official DCAT-AP 3.0.1 shapes and Herald's own."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from rdflib import BNode, Graph, Literal, URIRef
from rdflib.namespace import DCTERMS, RDF, XSD

from herald.catalog.errors import MetadataError
from herald.catalog.metadata import (
    DCAT,
    SHA256,
    SPDX,
    Agent,
    CatalogInfo,
    CatalogUrls,
    render_catalog,
    render_entry,
)
from herald.catalog.validation import merged, tier_shapes, validate
from tests.catalog.official import HTML_SHAPES, RELEASE_SHAPES, official_shapes
from tests.catalog.samples import (
    BASIC_DATASET,
    CATALOG,
    HIGH_DATASET,
    ISSUED,
    MODIFIED,
    URLS,
    files,
)

MINIMAL_CATALOG = CatalogInfo(
    title="Minimal catalog",
    description="Only what DCAT-AP requires.",
    publisher=Agent("Example office", "https://example.org/office"),
)


def _official(*names: str) -> Graph:
    return official_shapes(*names)


def _basic_metadata() -> Graph:
    return merged(
        [
            render_catalog(MINIMAL_CATALOG, URLS),
            render_entry(BASIC_DATASET, 1, files(1), URLS, ISSUED, MODIFIED),
        ]
    )


def _high_metadata() -> Graph:
    return merged(
        [
            render_catalog(CATALOG, URLS),
            render_entry(HIGH_DATASET, 3, files(3), URLS, ISSUED, MODIFIED),
        ]
    )


def test_basic_metadata_has_no_violation_of_the_official_mandatory_shapes() -> None:
    for shapes in (_official("html/shacl/shapes.ttl"), _official(RELEASE_SHAPES)):
        report = validate(_basic_metadata(), shapes=shapes)
        assert report.violations == [], report.text()


def test_the_release_shapes_want_the_checksum_algorithm_typed() -> None:
    report = validate(_high_metadata(), shapes=_official(RELEASE_SHAPES))
    assert report.findings == (), report.text()
    untyped = _high_metadata()
    untyped.remove((SHA256, RDF.type, None))
    found = validate(untyped, shapes=_official(RELEASE_SHAPES)).violations
    assert found and {f.path for f in found} == {"spdx:algorithm"}
    assert all("ChecksumAlgorithm" in f.message for f in found)


def test_high_metadata_has_no_violation_nor_warning_of_the_official_shapes() -> None:
    shapes = _official(*HTML_SHAPES)
    report = validate(_high_metadata(), shapes=shapes)
    assert report.findings == (), report.text()
    # The same shapes do notice what the basic metadata leaves out.
    basic = validate(_basic_metadata(), shapes=shapes)
    assert basic.warnings and not basic.violations


def test_metadata_conforms_to_herald_shapes_of_its_tier() -> None:
    assert validate(_basic_metadata(), "basic").findings == ()
    assert validate(_high_metadata(), "high").findings == ()
    high = validate(_basic_metadata(), "high")
    assert not high.conforms
    assert {(f.focus_node, f.path) for f in high.violations} >= {
        ("<https://data.example.org/v1/datasets/measures#dataset>", "dcat:keyword"),
        ("<https://data.example.org/v1/datasets/measures#dataset>", "dcat:contactPoint"),
        ("<https://data.example.org/v1/catalog#catalog>", "foaf:homepage"),
    }


def test_missing_mandatory_property_fails_with_a_readable_report() -> None:
    untitled = dataclasses.replace(BASIC_DATASET, description="  ")
    graph = merged(
        [
            render_catalog(MINIMAL_CATALOG, URLS),
            render_entry(untitled, 2, files(2), URLS, ISSUED, MODIFIED),
        ]
    )
    report = validate(graph, "basic")
    assert not report.conforms
    [finding] = report.findings
    assert finding.severity == "Violation"
    assert finding.focus_node == "<https://data.example.org/v1/datasets/measures#dataset>"
    assert finding.path == "dct:description"
    assert finding.message == "A dataset needs a description (dct:description)."
    assert finding.shape == "herald:DatasetShape / dct:description"
    assert report.text().splitlines() == [
        "does not conform to the basic tier: 1 violation(s), 0 warning(s)",
        "- Violation: <https://data.example.org/v1/datasets/measures#dataset> dct:description: "
        "A dataset needs a description (dct:description). "
        "[shape herald:DatasetShape / dct:description]",
    ]
    assert report.to_dict()["conforms"] is False


def test_broken_distribution_and_checksum_are_reported() -> None:
    graph = _basic_metadata()
    json_dist = URIRef(URLS.distribution("measures", 1, "json"))
    graph.remove((json_dist, DCAT.accessURL, None))
    checksum = graph.value(json_dist, SPDX.checksum)
    graph.set((checksum, SPDX.checksumValue, Literal("not hex")))  # type: ignore[arg-type]
    graph.add((json_dist, DCAT.byteSize, Literal("-3", datatype=XSD.integer)))
    found = {(f.focus_node, f.path) for f in validate(graph, "basic").violations}
    assert found == {
        (f"<{json_dist}>", "dcat:accessURL"),
        (f"<{json_dist}>", "dcat:byteSize"),
        (f"<{checksum}>", "spdx:checksumValue"),
    }


def test_distributions_describe_their_files() -> None:
    exported = files(4, records=300_000)
    graph = render_entry(HIGH_DATASET, 4, exported, URLS, ISSUED, MODIFIED)
    dataset = URIRef(URLS.dataset("measures"))
    assert graph.value(dataset, DCAT.version) == Literal("4")
    assert (URIRef(URLS.catalog), DCAT.dataset, dataset) in graph
    for file in exported:
        node = URIRef(URLS.distribution("measures", 4, file.format.name))
        assert (dataset, DCAT.distribution, node) in graph
        assert graph.value(node, DCAT.downloadURL) == URIRef(
            f"https://data.example.org/v1/datasets/measures/versions/4/files/{file.name}"
        )
        assert graph.value(node, DCAT.accessURL) == URIRef(URLS.version("measures", 4))
        assert graph.value(node, DCAT.mediaType) == URIRef(file.format.media_type_uri)
        assert graph.value(node, DCTERMS.format) == URIRef(file.format.file_type_uri)
        size = graph.value(node, DCAT.byteSize)
        assert size == Literal(file.byte_size, datatype=XSD.nonNegativeInteger)
        checksum = graph.value(node, SPDX.checksum)
        assert graph.value(checksum, SPDX.algorithm) == SHA256
        value = graph.value(checksum, SPDX.checksumValue)
        assert str(value) == file.sha256
        assert graph.value(node, DCTERMS.license) == URIRef(
            "https://creativecommons.org/licenses/by/4.0/"
        )
        assert graph.value(node, DCTERMS.issued) == Literal(
            "2025-03-02T08:30:00+00:00", datatype=XSD.dateTime
        )
    assert not any(isinstance(term, BNode) for triple in graph for term in triple)


def test_own_shapes_parse_and_name_every_message() -> None:
    for tier in ("basic", "high"):
        shapes = tier_shapes(tier)
        assert len(shapes) > 50
    with pytest.raises(ValueError, match="unknown quality tier"):
        tier_shapes("gold")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"landing_page": "/relative"}, "must be an absolute URI"),
        ({"publisher": Agent("Office", "example.org/office")}, "publisher URI"),
        ({"languages": ("http://x.org/a b",)}, "characters not allowed"),
    ],
)
def test_malformed_identifiers_are_refused(change: dict[str, object], message: str) -> None:
    dataset = dataclasses.replace(HIGH_DATASET, **change)  # type: ignore[arg-type]
    with pytest.raises(MetadataError, match=message):
        render_entry(dataset, 1, files(), URLS, ISSUED, MODIFIED)


def test_dates_need_a_time_zone_and_urls_a_base() -> None:
    naive = dt.datetime(2025, 1, 1, 12, 0)
    with pytest.raises(MetadataError, match="time zone"):
        render_entry(HIGH_DATASET, 1, files(), URLS, naive, MODIFIED)
    with pytest.raises(MetadataError, match="base URL"):
        CatalogUrls("data.example.org")
    with pytest.raises(MetadataError, match="positive"):
        render_entry(HIGH_DATASET, 0, files(), URLS, ISSUED, MODIFIED)
