"""DCAT-AP 3.0 metadata: the catalog, a dataset version and one distribution per file.

The renderer states what it is given and nothing more: an empty title or a missing
licence is simply not stated, and the SHACL validation of the chosen tier (see
:mod:`herald.catalog.validation`) decides whether that is acceptable. Malformed
identifiers (a URI that is not absolute, a naive timestamp) are refused at once.
Every node is an IRI (no blank nodes), so an entry can be inserted, compared and
removed as plain N-Triples.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from rdflib import Graph, Literal, Namespace, URIRef
from rdflib.namespace import DCTERMS, FOAF, RDF, SKOS, XSD

from herald import tenancy
from herald.catalog.errors import MetadataError
from herald.catalog.export import ExportedFile
from herald.catalog.store import check_segment

# rdflib's DCAT namespace predates DCAT 3 (no dcat:version): use an open one.
DCAT = Namespace("http://www.w3.org/ns/dcat#")
SPDX = Namespace("http://spdx.org/rdf/terms#")
VCARD = Namespace("http://www.w3.org/2006/vcard/ns#")
LOCN = Namespace("http://www.w3.org/ns/locn#")
DCATAP = Namespace("http://data.europa.eu/r5r/")
ADMS = Namespace("http://www.w3.org/ns/adms#")
PROV = Namespace("http://www.w3.org/ns/prov#")
GSP = Namespace("http://www.opengis.net/ont/geosparql#")
EU_LANGUAGE = "http://publications.europa.eu/resource/authority/language/"
SHA256 = SPDX.checksumAlgorithm_sha256
STABLE = "http://publications.europa.eu/resource/authority/planned-availability/STABLE"
PREFIXES = {
    "dcat": DCAT,
    "dct": DCTERMS,
    "foaf": FOAF,
    "skos": SKOS,
    "spdx": SPDX,
    "vcard": VCARD,
    "locn": LOCN,
    "dcatap": DCATAP,
    "adms": ADMS,
    "prov": PROV,
    "xsd": XSD,
}


def _iri(value: str, what: str) -> URIRef:
    parts = urlsplit(value)
    if not parts.scheme or not (parts.netloc or parts.scheme in {"mailto", "urn", "tel"}):
        raise MetadataError(f"{what} must be an absolute URI, got {value!r}")
    if re.search(r"[\s<>\"{}|\\^`]", value):
        raise MetadataError(f"{what} contains characters not allowed in a URI: {value!r}")
    return URIRef(value)


def _when(value: dt.datetime | dt.date, what: str) -> Literal:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            raise MetadataError(f"{what} must carry a time zone, got {value.isoformat()}")
        return Literal(value.isoformat(), datatype=XSD.dateTime)
    return Literal(value.isoformat(), datatype=XSD.date)


@dataclass(frozen=True)
class Concept:
    """A term of a controlled vocabulary (theme, agent type, licence type...)."""

    uri: str
    label: str


@dataclass(frozen=True)
class Agent:
    name: str
    uri: str
    type: Concept | None = None  # e.g. an ADMS publisher type


@dataclass(frozen=True)
class ContactPoint:
    name: str
    email: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class License:
    uri: str
    type: Concept | None = None  # e.g. an ADMS licence type


@dataclass(frozen=True)
class Location:
    uri: str
    bbox: str | None = None  # WKT polygon
    centroid: str | None = None  # WKT point


@dataclass(frozen=True)
class Period:
    start: dt.date
    end: dt.date | None = None


def language(code: str) -> str:
    """The EU authority URI of a three-letter language code (``ENG``, ``FRA``...)."""
    if not re.fullmatch(r"[A-Za-z]{3}", code):
        raise MetadataError(f"language must be a three-letter code such as ENG, got {code!r}")
    return EU_LANGUAGE + code.upper()


@dataclass(frozen=True)
class CatalogInfo:
    title: str
    description: str
    publisher: Agent
    homepage: str | None = None
    languages: Sequence[str] = ()
    license: License | None = None
    issued: dt.date | dt.datetime | None = None
    modified: dt.date | dt.datetime | None = None
    theme_taxonomy: Concept | None = None  # the concept scheme the themes come from
    spatial: Location | None = None


@dataclass(frozen=True)
class DatasetInfo:
    id: str
    title: str
    description: str
    publisher: Agent | None = None
    license: License | None = None
    keywords: Sequence[str] = ()
    themes: Sequence[Concept] = ()
    contact_point: ContactPoint | None = None
    languages: Sequence[str] = ()
    spatial: Location | None = None
    temporal: Period | None = None
    landing_page: str | None = None


@dataclass(frozen=True)
class Lineage:
    """How a version was produced: its generations run, read from ``source``."""

    run: int
    source: str  # what the records were read from, fit to publish
    started: dt.datetime
    ended: dt.datetime


@dataclass(frozen=True)
class PublishedVersion:
    """One published version (a generation) as the entry links it."""

    version: int
    generation: int
    files: Sequence[ExportedFile]
    published: dt.datetime
    record_count: int
    lineage: Lineage

    @property
    def notes(self) -> str:
        return (
            f"Version {self.version}: generation {self.generation} of the dataset, "
            f"{self.record_count} records exported from {self.lineage.source} by "
            f"publication run {self.lineage.run}."
        )


@dataclass(frozen=True)
class CatalogUrls:
    """Where catalog resources live, from one configurable public base URL.

    Downloads are served at ``/v1/datasets/{id}/versions/{v}/files/{name}``; the
    dataset's named graph in the triple store is its ``/v1/datasets/{id}`` document.
    """

    base: str
    _root: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.base)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise MetadataError(f"base URL must be an absolute http(s) URL, got {self.base!r}")
        object.__setattr__(self, "_root", self.base.rstrip("/"))

    @property
    def catalog(self) -> str:
        return f"{self.catalog_graph}#catalog"

    @property
    def catalog_graph(self) -> str:
        """The catalog of the tenant acting now (see :meth:`catalog_graph_of`)."""
        return self.catalog_graph_of(tenancy.current())

    def catalog_graph_of(self, tenant: str) -> str:
        """A tenant's catalog: each tenant's catalog is a graph of its own, listing its
        published datasets only (the default tenant's keeps the URL a single-tenant
        install always had)."""
        if tenant in (tenancy.DEFAULT, tenancy.PLATFORM):
            return f"{self._root}/v1/catalog"
        return f"{self._root}/v1/catalog/tenants/{tenancy.checked(tenant)}"

    @property
    def combined_catalog(self) -> str:
        """The catalog of every tenant's catalogs (served when configured)."""
        return f"{self._root}/v1/catalog/combined#catalog"

    def entry_graph(self, dataset_id: str) -> str:
        return f"{self._root}/v1/datasets/{check_segment(dataset_id, 'dataset id')}"

    def dataset(self, dataset_id: str) -> str:
        return f"{self.entry_graph(dataset_id)}#dataset"

    def version(self, dataset_id: str, version: int) -> str:
        return f"{self.entry_graph(dataset_id)}/versions/{version}"

    def version_dataset(self, dataset_id: str, version: int) -> str:
        """The dataset as it was at ``version`` (a dcat:Dataset, version of the dataset)."""
        return f"{self.version(dataset_id, version)}#dataset"

    def distribution(self, dataset_id: str, version: int, fmt: str) -> str:
        return f"{self.version(dataset_id, version)}#{fmt}"

    def download(self, dataset_id: str, version: int, name: str) -> str:
        return f"{self.version(dataset_id, version)}/files/{quote(name)}"


def combined_description(urls: CatalogUrls, title: str, tenants: Sequence[str]) -> Graph:
    """The combined catalog: a catalog whose parts are the tenants' catalogs (DCAT's
    ``dcat:catalog``); each dataset stays listed by its own tenant's catalog only."""
    graph = new_graph()
    node = URIRef(urls.combined_catalog)
    graph.add((node, RDF.type, DCAT.Catalog))
    graph.add((node, DCTERMS.title, Literal(f"{title} (every tenant)", lang="en")))
    for tenant in tenants:
        graph.add((node, DCAT.catalog, URIRef(f"{urls.catalog_graph_of(tenant)}#catalog")))
    return graph


def new_graph() -> Graph:
    graph = Graph()
    for prefix, namespace in PREFIXES.items():
        graph.bind(prefix, namespace)
    return graph


class _Writer:
    """Adds typed resources to a graph, each described once."""

    def __init__(self, graph: Graph) -> None:
        self.g = graph

    def text(self, node: URIRef, prop: URIRef, value: str | None) -> None:
        if value and value.strip():
            self.g.add((node, prop, Literal(value.strip())))

    def concept(self, node: URIRef, prop: URIRef, concept: Concept, what: str) -> None:
        iri = _iri(concept.uri, what)
        self.g.add((node, prop, iri))
        self.g.add((iri, RDF.type, SKOS.Concept))
        self.text(iri, SKOS.prefLabel, concept.label)

    def agent(self, node: URIRef, agent: Agent) -> None:
        iri = _iri(agent.uri, "publisher URI")
        self.g.add((node, DCTERMS.publisher, iri))
        self.g.add((iri, RDF.type, FOAF.Agent))
        self.text(iri, FOAF.name, agent.name)
        if agent.type is not None:
            self.concept(iri, DCTERMS.type, agent.type, "publisher type")

    def license(self, node: URIRef, license: License) -> None:
        iri = _iri(license.uri, "licence URI")
        self.g.add((node, DCTERMS.license, iri))
        self.g.add((iri, RDF.type, DCTERMS.LicenseDocument))
        if license.type is not None:
            self.concept(iri, DCTERMS.type, license.type, "licence type")

    def languages(self, node: URIRef, languages: Sequence[str]) -> None:
        for value in languages:
            iri = _iri(value, "language")
            self.g.add((node, DCTERMS.language, iri))
            self.g.add((iri, RDF.type, DCTERMS.LinguisticSystem))

    def location(self, node: URIRef, location: Location) -> None:
        iri = _iri(location.uri, "spatial coverage")
        self.g.add((node, DCTERMS.spatial, iri))
        self.g.add((iri, RDF.type, DCTERMS.Location))
        if location.bbox:
            self.g.add((iri, DCAT.bbox, Literal(location.bbox, datatype=GSP.wktLiteral)))
        if location.centroid:
            self.g.add((iri, DCAT.centroid, Literal(location.centroid, datatype=GSP.wktLiteral)))

    def document(self, node: URIRef, prop: URIRef, url: str, what: str) -> None:
        iri = _iri(url, what)
        self.g.add((node, prop, iri))
        self.g.add((iri, RDF.type, FOAF.Document))

    def when(self, node: URIRef, prop: URIRef, value: dt.date | dt.datetime | None) -> None:
        if value is not None:
            self.g.add((node, prop, _when(value, str(prop))))


# Datatypes DCAT-AP prescribes that a triple store may canonicalise away: Oxigraph keeps
# every integer as xsd:integer, so a byte size comes back without its xsd:nonNegativeInteger.
_PRESCRIBED = {DCAT.byteSize: XSD.nonNegativeInteger}
_INTEGERS = {
    XSD[name]
    for name in (
        "integer", "long", "int", "short", "byte", "nonNegativeInteger", "positiveInteger",
        "unsignedLong", "unsignedInt", "unsignedShort", "unsignedByte",
    )
}  # fmt: skip


def restore_datatypes(graph: Graph) -> Graph:
    """Give back the datatypes DCAT-AP prescribes where a store canonicalised them (a
    non-negative integer read back as ``xsd:integer``); every reader of the catalog gets
    the graph through this, and the pipeline validates what it returns."""
    for prop, datatype in _PRESCRIBED.items():
        for node, value in list(graph.subject_objects(prop)):
            if not isinstance(value, Literal) or value.datatype == datatype:
                continue
            number = value.value
            if value.datatype in _INTEGERS and isinstance(number, int) and number >= 0:
                graph.remove((node, prop, value))
                graph.add((node, prop, Literal(str(number), datatype=datatype)))
    return graph


def render_catalog(info: CatalogInfo, urls: CatalogUrls) -> Graph:
    """The catalog's own description (its datasets are linked from their entries)."""
    graph = new_graph()
    w = _Writer(graph)
    node = URIRef(urls.catalog)
    graph.add((node, RDF.type, DCAT.Catalog))
    w.text(node, DCTERMS.title, info.title)
    w.text(node, DCTERMS.description, info.description)
    w.agent(node, info.publisher)
    if info.homepage:
        w.document(node, FOAF.homepage, info.homepage, "catalog homepage")
    w.languages(node, info.languages)
    if info.license is not None:
        w.license(node, info.license)
    w.when(node, DCTERMS.issued, info.issued)
    w.when(node, DCTERMS.modified, info.modified)
    if info.theme_taxonomy is not None:
        scheme = _iri(info.theme_taxonomy.uri, "theme taxonomy")
        graph.add((node, DCAT.themeTaxonomy, scheme))
        graph.add((scheme, RDF.type, SKOS.ConceptScheme))
        w.text(scheme, DCTERMS.title, info.theme_taxonomy.label)
    if info.spatial is not None:
        w.location(node, info.spatial)
    return graph


def render_entry(
    dataset: DatasetInfo,
    version: int,
    files: Sequence[ExportedFile],
    urls: CatalogUrls,
    issued: dt.datetime,
    modified: dt.datetime,
    versions: Sequence[PublishedVersion] = (),
) -> Graph:
    """One dataset entry: the dataset at ``version``, its distributions, and its link
    from the catalog. ``issued`` is the first publication, ``modified`` this version's.
    ``versions`` are its published versions (this one included), linked as DCAT 3
    versions with their lineage."""
    if version < 1:
        raise MetadataError(f"version must be a positive integer, got {version}")
    graph = new_graph()
    w = _Writer(graph)
    node = URIRef(urls.dataset(dataset.id))
    graph.add((URIRef(urls.catalog), DCAT.dataset, node))
    graph.add((node, DCTERMS.identifier, Literal(dataset.id)))
    graph.add((node, DCAT.version, Literal(str(version))))
    _describe(w, node, dataset, urls)
    w.when(node, DCTERMS.issued, issued)
    w.when(node, DCTERMS.modified, modified)
    for file in files:
        _distribution(w, node, dataset, version, file, urls, modified)
    _versions(w, node, dataset, versions, urls)
    return graph


def _versions(
    w: _Writer,
    node: URIRef,
    dataset: DatasetInfo,
    versions: Sequence[PublishedVersion],
    urls: CatalogUrls,
) -> None:
    """DCAT 3 versioning: the dataset has each published version (a dcat:Dataset of its
    own, with its files, notes and lineage), the highest as its current version, and each
    version names the one before it."""
    g = w.g
    previous: URIRef | None = None
    ordered = sorted(versions, key=lambda v: v.version)
    for published in ordered:
        vnode = URIRef(urls.version_dataset(dataset.id, published.version))
        g.add((node, DCAT.hasVersion, vnode))
        g.add((vnode, DCAT.isVersionOf, node))
        g.add((vnode, DCTERMS.identifier, Literal(f"{dataset.id}/versions/{published.version}")))
        g.add((vnode, DCAT.version, Literal(str(published.version))))
        g.add((vnode, ADMS.versionNotes, Literal(published.notes)))
        _describe(w, vnode, dataset, urls)
        w.when(vnode, DCTERMS.issued, published.published)
        w.when(vnode, DCTERMS.modified, published.published)
        for file in published.files:
            _distribution(w, vnode, dataset, published.version, file, urls, published.published)
        if previous is not None:
            g.add((vnode, DCAT.previousVersion, previous))
        _lineage(w, vnode, dataset, published, urls)
        previous = vnode
    if previous is not None:
        g.add((node, DCAT.hasCurrentVersion, previous))


def _lineage(
    w: _Writer, vnode: URIRef, dataset: DatasetInfo, published: PublishedVersion, urls: CatalogUrls
) -> None:
    """PROV-O: the version was generated by its publication run, which used the source;
    the source is the version's dct:source."""
    g = w.g
    base = urls.version(dataset.id, published.version)
    activity, source = URIRef(f"{base}#generation"), URIRef(f"{base}#source")
    lineage = published.lineage
    g.add((vnode, PROV.wasGeneratedBy, activity))
    g.add((activity, RDF.type, PROV.Activity))
    g.add((activity, DCTERMS.identifier, Literal(f"run {lineage.run}")))
    g.add((activity, PROV.used, source))
    w.when(activity, PROV.startedAtTime, lineage.started)
    w.when(activity, PROV.endedAtTime, lineage.ended)
    g.add((vnode, DCTERMS.source, source))
    g.add((source, RDF.type, DCAT.Dataset))
    g.add((source, RDF.type, PROV.Entity))
    name = dataset.title.strip() or dataset.id
    g.add((source, DCTERMS.title, Literal(f"Source of {name}")))
    g.add(
        (
            source,
            DCTERMS.description,
            Literal(f"The records of version {published.version} were read from {lineage.source}."),
        )
    )


def _describe(w: _Writer, node: URIRef, dataset: DatasetInfo, urls: CatalogUrls) -> None:
    """What the dataset and each of its versions state alike."""
    graph = w.g
    graph.add((node, RDF.type, DCAT.Dataset))
    w.text(node, DCTERMS.title, dataset.title)
    w.text(node, DCTERMS.description, dataset.description)
    if dataset.publisher is not None:
        w.agent(node, dataset.publisher)
    for keyword in dataset.keywords:
        w.text(node, DCAT.keyword, keyword)
    for theme in dataset.themes:
        w.concept(node, DCAT.theme, theme, "theme")
    if dataset.contact_point is not None:
        _contact(graph, node, dataset, urls)
    w.languages(node, dataset.languages)
    if dataset.spatial is not None:
        w.location(node, dataset.spatial)
    if dataset.temporal is not None:
        period = URIRef(f"{urls.dataset(dataset.id)}-period")
        graph.add((node, DCTERMS.temporal, period))
        graph.add((period, RDF.type, DCTERMS.PeriodOfTime))
        w.when(period, DCAT.startDate, dataset.temporal.start)
        w.when(period, DCAT.endDate, dataset.temporal.end)
    if dataset.license is not None:  # DCAT-AP reads it from the distributions too
        w.license(node, dataset.license)
    if dataset.landing_page:
        w.document(node, DCAT.landingPage, dataset.landing_page, "landing page")


def _contact(graph: Graph, node: URIRef, dataset: DatasetInfo, urls: CatalogUrls) -> None:
    contact = dataset.contact_point
    assert contact is not None
    iri = URIRef(f"{urls.dataset(dataset.id)}-contact")
    graph.add((node, DCAT.contactPoint, iri))
    graph.add((iri, RDF.type, VCARD.Kind))
    if contact.name.strip():
        graph.add((iri, VCARD.fn, Literal(contact.name.strip())))
    if contact.email:
        address = contact.email.removeprefix("mailto:")
        if not re.fullmatch(r"[^@\s<>]+@[^@\s<>]+", address):
            raise MetadataError(f"contact email is not an address: {contact.email!r}")
        graph.add((iri, VCARD.hasEmail, URIRef(f"mailto:{address}")))
    if contact.url:
        graph.add((iri, VCARD.hasURL, _iri(contact.url, "contact URL")))


def _distribution(
    w: _Writer,
    dataset_node: URIRef,
    dataset: DatasetInfo,
    version: int,
    file: ExportedFile,
    urls: CatalogUrls,
    modified: dt.datetime,
) -> None:
    g = w.g
    fmt = file.format
    node = URIRef(urls.distribution(dataset.id, version, fmt.name))
    g.add((dataset_node, DCAT.distribution, node))
    g.add((node, RDF.type, DCAT.Distribution))
    title = f"{dataset.title.strip() or dataset.id} ({fmt.name.upper()})"
    g.add((node, DCTERMS.title, Literal(title)))
    description = f"{file.record_count} records as {fmt.name.upper()}, version {version}."
    g.add((node, DCTERMS.description, Literal(description)))
    g.add((node, DCAT.downloadURL, URIRef(urls.download(dataset.id, version, file.name))))
    g.add((node, DCAT.accessURL, URIRef(urls.version(dataset.id, version))))
    media = URIRef(fmt.media_type_uri)
    g.add((node, DCAT.mediaType, media))
    g.add((media, RDF.type, DCTERMS.MediaType))
    file_type = URIRef(fmt.file_type_uri)
    g.add((node, DCTERMS.format, file_type))
    g.add((file_type, RDF.type, DCTERMS.MediaTypeOrExtent))
    g.add((node, DCAT.byteSize, Literal(file.byte_size, datatype=XSD.nonNegativeInteger)))
    if not re.fullmatch(r"[0-9a-f]{64}", file.sha256):
        raise MetadataError(f"{file.name}: SHA-256 must be 64 lower-case hex digits")
    checksum = URIRef(f"{node}-sha256")
    g.add((node, SPDX.checksum, checksum))
    g.add((checksum, RDF.type, SPDX.Checksum))
    g.add((checksum, SPDX.algorithm, SHA256))
    g.add((SHA256, RDF.type, SPDX.ChecksumAlgorithm))  # the 3.0.1 release shapes ask for it
    g.add((checksum, SPDX.checksumValue, Literal(file.sha256, datatype=XSD.hexBinary)))
    w.concept(node, DCATAP.availability, Concept(STABLE, "stable"), "availability")
    w.when(node, DCTERMS.issued, modified)
    w.when(node, DCTERMS.modified, modified)
    if dataset.license is not None:
        w.license(node, dataset.license)
