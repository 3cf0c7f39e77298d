"""Catalog and dataset descriptions shared by the catalog tests."""

from __future__ import annotations

import datetime as dt

from herald.catalog.export import ExportedFile
from herald.catalog.formats import FORMATS
from herald.catalog.metadata import (
    Agent,
    CatalogInfo,
    CatalogUrls,
    Concept,
    ContactPoint,
    DatasetInfo,
    License,
    Location,
    Period,
    language,
)

URLS = CatalogUrls("https://data.example.org")
NATIONAL_AUTHORITY = Concept(
    "http://purl.org/adms/publishertype/NationalAuthority", "National authority"
)
PUBLISHER = Agent("Example Statistics Office", "https://example.org/office", NATIONAL_AUTHORITY)
CC_BY = License(
    "https://creativecommons.org/licenses/by/4.0/",
    Concept("http://purl.org/adms/licencetype/Attribution", "Attribution"),
)
BELGIUM = Location(
    "http://publications.europa.eu/resource/authority/country/BEL",
    bbox="POLYGON((2.5 49.5, 6.4 49.5, 6.4 51.5, 2.5 51.5, 2.5 49.5))",
    centroid="POINT(4.5 50.5)",
)
CATALOG = CatalogInfo(
    title="Example open data",
    description="Datasets published by the example office.",
    publisher=PUBLISHER,
    homepage="https://data.example.org/",
    languages=(language("ENG"),),
    license=CC_BY,
    issued=dt.date(2025, 1, 1),
    modified=dt.date(2025, 6, 1),
    theme_taxonomy=Concept(
        "http://publications.europa.eu/resource/authority/data-theme", "Data themes"
    ),
    spatial=BELGIUM,
)
BASIC_DATASET = DatasetInfo(
    id="measures",
    title="Measures",
    description="Daily measures.",
)
HIGH_DATASET = DatasetInfo(
    id="measures",
    title="Measures",
    description="Daily measures from the network of stations.",
    publisher=PUBLISHER,
    license=CC_BY,
    keywords=("measures", "stations"),
    themes=(
        Concept("http://publications.europa.eu/resource/authority/data-theme/ENVI", "Environment"),
    ),
    contact_point=ContactPoint("Open data team", email="opendata@example.org"),
    languages=(language("eng"),),
    spatial=BELGIUM,
    temporal=Period(dt.date(2024, 1, 1), dt.date(2024, 12, 31)),
    landing_page="https://example.org/measures",
)
ISSUED = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)
MODIFIED = dt.datetime(2025, 3, 2, 8, 30, tzinfo=dt.UTC)


def files(version: int = 1, records: int = 1000) -> list[ExportedFile]:
    return [
        ExportedFile(
            key=f"measures/v{version}/measures.{fmt.extension}",
            name=f"measures.{fmt.extension}",
            format=fmt,
            byte_size=1000 + i,
            record_count=records,
            sha256=f"{i:x}" * 64,
        )
        for i, fmt in enumerate(FORMATS.values(), start=10)
    ]
