"""The publication steps as plain functions, for a pipeline to call in order.

``export_version`` (get_data) streams a dataset's source into its version's files;
``build_entry`` (persist_data) renders and validates the entry; ``write_entry`` puts
it in the triple store in one atomic request; ``remove_version`` undoes a version's
effects (files, entry) and can be retried until it succeeds. Where things live comes
from :class:`CatalogSettings` (``HERALD_PUBLIC_URL``, ``HERALD_SPARQL_*``, ...).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass

from rdflib import Graph

from herald.catalog.datasets import Dataset
from herald.catalog.export import ExportResult, Progress, export_records, version_prefix
from herald.catalog.metadata import (
    Agent,
    CatalogInfo,
    CatalogUrls,
    Concept,
    render_catalog,
    render_entry,
)
from herald.catalog.source_access import Cancellation, SourceAccess
from herald.catalog.sources import source_from_spec
from herald.catalog.store import ExportStore, LocalExportStore
from herald.catalog.triplestore import (
    OxigraphStore,
    SparqlEndpointStore,
    TripleStore,
    delete_entry,
    replace_entry,
)
from herald.catalog.validation import ValidationReport, validate
from herald.config import Settings
from herald.errors import Permanent

EU_DATA_THEMES = Concept(
    "http://publications.europa.eu/resource/authority/data-theme", "Data theme"
)


@dataclass(frozen=True)
class CatalogSettings:
    """How the catalog presents itself and where its triple store is.

    With no SPARQL URLs the triple store is the embedded Oxigraph under the data dir.
    The publisher defaults to the catalog itself (named by its title and public URL).
    """

    public_url: str = "http://localhost:8000"
    title: str = "Herald open data catalog"
    description: str = "Datasets published with Herald."
    publisher_name: str | None = None
    publisher_uri: str | None = None
    sparql_query_url: str | None = None
    sparql_update_url: str | None = None

    def __post_init__(self) -> None:
        CatalogUrls(self.public_url)  # refuses a malformed URL now, not at first use
        if (self.sparql_query_url is None) != (self.sparql_update_url is None):
            raise ValueError("set both SPARQL query and update URLs, or neither")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> CatalogSettings:
        env = dict(os.environ if environ is None else environ)
        defaults = cls()
        return cls(
            public_url=env.get("HERALD_PUBLIC_URL") or defaults.public_url,
            title=env.get("HERALD_CATALOG_TITLE") or defaults.title,
            description=env.get("HERALD_CATALOG_DESCRIPTION") or defaults.description,
            publisher_name=env.get("HERALD_CATALOG_PUBLISHER_NAME") or None,
            publisher_uri=env.get("HERALD_CATALOG_PUBLISHER_URI") or None,
            sparql_query_url=env.get("HERALD_SPARQL_QUERY_URL") or None,
            sparql_update_url=env.get("HERALD_SPARQL_UPDATE_URL") or None,
        )

    @property
    def urls(self) -> CatalogUrls:
        return CatalogUrls(self.public_url)

    def info(self, issued: dt.date | None = None) -> CatalogInfo:
        publisher = Agent(
            self.publisher_name or self.title,
            self.publisher_uri or self.public_url,
        )
        return CatalogInfo(
            title=self.title,
            description=self.description,
            publisher=publisher,
            homepage=self.public_url,
            issued=issued,
            theme_taxonomy=EU_DATA_THEMES,
        )

    def open_triple_store(self, settings: Settings) -> TripleStore:
        if self.sparql_query_url and self.sparql_update_url:
            return SparqlEndpointStore(self.sparql_query_url, self.sparql_update_url)
        return OxigraphStore.for_settings(settings)


def open_export_store(settings: Settings) -> LocalExportStore:
    return LocalExportStore.for_settings(settings)


def export_version(
    dataset: Dataset,
    version: int,
    store: ExportStore,
    access: SourceAccess,
    progress: Progress | None = None,
    cancellation: Cancellation | None = None,
) -> ExportResult:
    """get_data: stream the dataset's source into ``<id>/v<version>/<id>.{json,xml,csv}``.

    Files left by an earlier, interrupted attempt at this version (never published)
    are removed first, so a retry produces complete files of its own.
    """
    prefix = version_prefix(dataset.id, version)
    for key in store.list(prefix):
        store.delete(key)
    source = source_from_spec(dataset.source, access, cancellation)
    return export_records(source, store, prefix, dataset.id, progress=progress)


@dataclass(frozen=True)
class Entry:
    graph: Graph
    report: ValidationReport

    @property
    def turtle(self) -> str:
        return self.graph.serialize(format="turtle")


class MetadataRejected(Permanent):
    """The entry fails the SHACL shapes of its tier: retrying cannot fix it."""

    def __init__(self, report: ValidationReport) -> None:
        super().__init__(report.text())
        self.report = report


def build_entry(
    dataset: Dataset,
    version: int,
    result: ExportResult,
    urls: CatalogUrls,
    issued: dt.datetime,
    modified: dt.datetime,
) -> Entry:
    """persist_data, first half: render the entry and validate it at the dataset's tier.

    Only the entry is validated: the catalog's own description is the operator's and
    is checked by :func:`check_catalog`. Raises :class:`MetadataRejected` (a permanent
    failure carrying the readable report) when the entry does not conform.
    """
    graph = render_entry(dataset.info, version, result.files, urls, issued, modified)
    report = validate(graph, dataset.tier)
    if not report.conforms:
        raise MetadataRejected(report)
    return Entry(graph, report)


def check_catalog(catalog: CatalogInfo, urls: CatalogUrls) -> ValidationReport:
    """The catalog's own description against the basic tier."""
    return validate(render_catalog(catalog, urls), "basic")


def write_entry(
    store: TripleStore, urls: CatalogUrls, dataset_id: str, entry: Entry, catalog: CatalogInfo
) -> None:
    """persist_data, second half: refresh the catalog description, then replace the
    dataset's entry in one atomic request (readers see the old copy or the new one)."""
    replace_entry(store, urls.catalog_graph, render_catalog(catalog, urls))
    replace_entry(store, urls.entry_graph(dataset_id), entry.graph)


def remove_version(
    export_store: ExportStore,
    keys: Iterable[str],
    triple_store: TripleStore | None = None,
    entry_graph: str | None = None,
) -> list[str]:
    """Delete a version's files (and, if given, its entry); safe to repeat after a
    partial failure. Returns the keys that were still present."""
    removed = [key for key in keys if export_store.delete(key)]
    if triple_store is not None and entry_graph is not None:
        delete_entry(triple_store, entry_graph)
    return removed
