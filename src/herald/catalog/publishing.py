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
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rdflib import Graph

from herald.catalog.datasets import Dataset
from herald.catalog.export import ExportResult, Progress, export_records, version_prefix
from herald.catalog.metadata import (
    Agent,
    CatalogInfo,
    CatalogUrls,
    Concept,
    License,
    Location,
    PublishedVersion,
    language,
    render_catalog,
    render_entry,
)
from herald.catalog.source_access import Cancellation, SourceAccess
from herald.catalog.sources import source_from_spec
from herald.catalog.store import ExportStore
from herald.catalog.triplestore import (
    OxigraphStore,
    SparqlEndpointStore,
    TripleStore,
    delete_entry,
    read_graphs,
    replace_entry,
)
from herald.catalog.validation import Tier, ValidationReport, validate
from herald.config import Settings, env_flag
from herald.errors import Permanent


def _label(uri: str) -> str:
    """A readable label from a vocabulary URI's last segment (``NationalAuthority``
    reads "National authority")."""
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", uri.rstrip("/").rsplit("/", 1)[-1])
    return words[:1].upper() + words[1:].lower()


EU_DATA_THEMES = Concept(
    "http://publications.europa.eu/resource/authority/data-theme", "Data theme"
)


PUBLISHER_TYPES = "http://purl.org/adms/publishertype/"
LICENCE_TYPES = "http://purl.org/adms/licencetype/"
CC0 = "https://creativecommons.org/publicdomain/zero/1.0/"


@dataclass(frozen=True)
class CatalogSettings:
    """How the catalog presents itself and where its triple store is.

    With no SPARQL URLs the triple store is the embedded Oxigraph under the data dir.
    The publisher defaults to the catalog's operator named by the catalog title, with
    an identifier of its own (``<public URL>/v1/catalog#publisher``): the catalog's
    homepage is a page, not an agent. ``publisher_type`` is an ADMS publisher type
    (``NationalAuthority``, ``Company``... or a full URI). The catalog's own metadata
    is offered under ``license`` (CC0 by default: descriptions of datasets are meant
    to be copied), in ``language`` (a three-letter code); ``spatial`` (an authority URI
    such as a country's) is the area the catalog covers, unstated by default.
    """

    public_url: str = "http://localhost:8000"
    title: str = "Herald open data catalog"
    description: str = "Datasets published with Herald."
    publisher_name: str | None = None
    publisher_uri: str | None = None
    publisher_type: str = "NonProfitOrganisation"
    language: str = "ENG"
    license: str = CC0
    spatial: str | None = None  # the area the catalog covers, an authority URI
    sparql_query_url: str | None = None
    sparql_update_url: str | None = None
    # how many of a dataset's newest versions its entry describes and links: rendering
    # and validating an entry costs in proportion to the versions it holds
    linked_versions: int = 20
    # HERALD_CATALOG_COMBINED: also serve one catalog of every tenant's published
    # datasets (each still listed by its own tenant's catalog); off by default
    combined: bool = False

    def __post_init__(self) -> None:
        CatalogUrls(self.public_url)  # refuses a malformed URL now, not at first use
        if (self.sparql_query_url is None) != (self.sparql_update_url is None):
            raise ValueError("set both SPARQL query and update URLs, or neither")
        if self.linked_versions < 1:
            raise ValueError("HERALD_CATALOG_LINKED_VERSIONS must be at least 1")
        self.info()  # refuses a malformed publisher, licence or language now

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
            publisher_type=env.get("HERALD_CATALOG_PUBLISHER_TYPE") or defaults.publisher_type,
            language=env.get("HERALD_CATALOG_LANGUAGE") or defaults.language,
            license=env.get("HERALD_CATALOG_LICENSE") or defaults.license,
            spatial=env.get("HERALD_CATALOG_SPATIAL") or None,
            sparql_query_url=env.get("HERALD_SPARQL_QUERY_URL") or None,
            sparql_update_url=env.get("HERALD_SPARQL_UPDATE_URL") or None,
            linked_versions=_count(env, "HERALD_CATALOG_LINKED_VERSIONS", defaults.linked_versions),
            combined=env_flag(env, "HERALD_CATALOG_COMBINED", defaults.combined),
        )

    @property
    def urls(self) -> CatalogUrls:
        return CatalogUrls(self.public_url)

    def info(
        self, issued: dt.datetime | None = None, modified: dt.datetime | None = None
    ) -> CatalogInfo:
        """The catalog's description; ``issued`` is its first publication, ``modified``
        its latest (unstated when unknown)."""
        kind = self.publisher_type
        type_uri = kind if ":" in kind else PUBLISHER_TYPES + kind
        publisher = Agent(
            self.publisher_name or self.title,
            self.publisher_uri or f"{self.urls.catalog_graph}#publisher",
            Concept(type_uri, _label(type_uri)),
        )
        licence_type = LICENCE_TYPES + "PublicDomain" if self.license == CC0 else None
        return CatalogInfo(
            title=self.title,
            description=self.description,
            publisher=publisher,
            homepage=self.public_url,
            languages=(language(self.language),),
            license=License(
                self.license,
                Concept(licence_type, "Public domain") if licence_type else None,
            ),
            issued=issued,
            modified=modified,
            theme_taxonomy=EU_DATA_THEMES,
            spatial=Location(self.spatial) if self.spatial else None,
        )

    def open_triple_store(self, settings: Settings) -> TripleStore:
        if self.sparql_query_url and self.sparql_update_url:
            return SparqlEndpointStore(self.sparql_query_url, self.sparql_update_url)
        return OxigraphStore.for_settings(settings)


def _count(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {raw!r}") from None


def export_version(
    dataset: Dataset,
    version: int,
    store: ExportStore,
    access: SourceAccess,
    progress: Progress | None = None,
    cancellation: Cancellation | None = None,
    *,
    attempt: str | None = None,
) -> ExportResult:
    """get_data: stream the source into ``<id>/v<version>[/<attempt>]/<id>.{json,xml,csv}``.

    ``attempt`` names the attempt's own folder (see
    :func:`herald.catalog.versions.attempt_prefix`): an attempt never overwrites or
    removes another's files, and a retry writes complete files of its own.
    """
    prefix = version_prefix(dataset.id, version) + (f"/{attempt}" if attempt else "")
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

    def __init__(self, report: ValidationReport, where: str | None = None) -> None:
        super().__init__(f"the entry {where} {report.text()}" if where else report.text())
        self.report = report


def build_entry(
    dataset: Dataset,
    version: int,
    result: ExportResult,
    urls: CatalogUrls,
    issued: dt.datetime,
    modified: dt.datetime,
    versions: Sequence[PublishedVersion] = (),
) -> Entry:
    """persist_data, first half: render the entry and validate it at the dataset's tier.

    Only the entry is validated: the catalog's own description is the operator's and
    is checked by :func:`check_catalog`. Raises :class:`MetadataRejected` (a permanent
    failure carrying the readable report) when the entry does not conform.
    """
    graph = render_entry(dataset.info, version, result.files, urls, issued, modified, versions)
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


def verify_entry(
    store: TripleStore, urls: CatalogUrls, dataset_id: str, tier: Tier
) -> ValidationReport:
    """The entry as readers get it from the store (read back, as the catalog endpoints
    serve it), validated at ``tier``: a store that changed what was written is caught
    here, before the version is published. Raises :class:`MetadataRejected`."""
    report = validate(read_graphs(store, [urls.entry_graph(dataset_id)]), tier)
    if not report.conforms:
        raise MetadataRejected(report, "as read back from the triple store")
    return report


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
