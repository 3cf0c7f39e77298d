"""Triple store backends: embedded Oxigraph, and over HTTP Oxigraph's server and Virtuoso
(real servers started here, spoken to by the SPARQL 1.1 protocol)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pyoxigraph
import pytest
from rdflib import Graph, URIRef
from rdflib.namespace import XSD

from herald.catalog.errors import TripleStoreError
from herald.catalog.metadata import DCAT, render_catalog, render_entry
from herald.catalog.triplestore import (
    OxigraphStore,
    SparqlEndpointStore,
    TripleStore,
    delete_entry,
    export_catalog,
    read_graphs,
    replace_entry,
    replace_update,
)
from herald.catalog.validation import validate
from tests.catalog.official import official_reports
from tests.catalog.samples import CATALOG, HIGH_DATASET, ISSUED, MODIFIED, URLS, files
from tests.catalog.servers import Endpoint, oxigraph_server, virtuoso_server

ENTRY = URLS.entry_graph("measures")
FOREIGN = "https://elsewhere.example.org/graphs/their-data"  # a graph Herald did not write
GRAPHS = [URLS.catalog_graph, ENTRY]
COPIES = (
    "PREFIX dcat: <http://www.w3.org/ns/dcat#> "
    f"SELECT ?v (COUNT(DISTINCT ?dist) AS ?n) WHERE {{ GRAPH <{ENTRY}> {{ "
    "?d dcat:version ?v ; dcat:distribution ?dist } } GROUP BY ?v"
)


def _entry(version: int) -> Graph:
    return render_entry(HIGH_DATASET, version, files(version), URLS, ISSUED, MODIFIED)


def _parsed_by_oxigraph(data: bytes, fmt: pyoxigraph.RdfFormat) -> Graph:
    """Parse with Oxigraph's parser (an independent reader of what rdflib wrote)."""
    triples = [q.triple for q in pyoxigraph.parse(data, format=fmt)]
    ntriples = pyoxigraph.serialize(triples, format=pyoxigraph.RdfFormat.N_TRIPLES)
    assert ntriples is not None
    return Graph().parse(data=ntriples.decode("utf-8"), format="nt")


@pytest.fixture(scope="module")
def oxigraph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    with oxigraph_server(tmp_path_factory.mktemp("oxigraph-server")) as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    with virtuoso_server(tmp_path_factory.mktemp("virtuoso")) as endpoint:
        yield endpoint


# Virtuoso takes its time to start and to take 40 replaces: in the slow set.
@pytest.fixture(params=["embedded", "oxigraph", pytest.param("virtuoso", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TripleStore]:
    backend: TripleStore
    if request.param == "embedded":
        backend = OxigraphStore(tmp_path / "store")
    else:
        endpoint: Endpoint = request.getfixturevalue(request.param)
        backend = SparqlEndpointStore(endpoint.query_url, endpoint.update_url)
        # The server is shared by this module's tests: empty Herald's graphs (a server's
        # own system graphs stay, as they would on a shared store).
        for graph in (URLS.catalog_graph, ENTRY, FOREIGN):
            delete_entry(backend, graph)
    try:
        yield backend
    finally:
        backend.close()


def test_replace_keeps_exactly_one_copy_and_delete_is_idempotent(store: TripleStore) -> None:
    replace_entry(store, URLS.catalog_graph, render_catalog(CATALOG, URLS))
    for version in (1, 2, 3):
        replace_entry(store, ENTRY, _entry(version))
        assert store.select(COPIES) == [{"v": str(version), "n": "3"}]
    delete_entry(store, ENTRY)
    delete_entry(store, ENTRY)
    assert store.select(COPIES) == []
    assert store.ask(f"ASK {{ GRAPH <{URLS.catalog_graph}> {{ ?c a ?t }} }}")


def test_catalog_exports_in_three_syntaxes(store: TripleStore) -> None:
    replace_entry(store, URLS.catalog_graph, render_catalog(CATALOG, URLS))
    replace_entry(store, ENTRY, _entry(2))
    foreign = Graph().parse(
        data=f'<{FOREIGN}#x> <http://example.org/p> "not Herald data" .', format="nt"
    )
    replace_entry(store, FOREIGN, foreign)
    expected = len(render_catalog(CATALOG, URLS) + _entry(2))

    def export(syntax: str) -> bytes:
        return export_catalog(store, syntax, graphs=GRAPHS)

    turtle = Graph().parse(data=export("turtle"), format="turtle")
    jsonld = _parsed_by_oxigraph(export("json-ld"), pyoxigraph.RdfFormat.JSON_LD)
    rdfxml = Graph().parse(data=export("rdf-xml"), format="xml")
    assert len(turtle) == len(jsonld) == len(rdfxml) == expected
    assert turtle.isomorphic(jsonld) and turtle.isomorphic(rdfxml)
    assert isinstance(json.loads(export("json-ld")), list | dict)
    assert ET.fromstring(export("rdf-xml")).tag.endswith("RDF")
    # Only the graphs named: not another's data, nor a server's system graphs.
    assert not any(str(s).startswith(FOREIGN) for s in turtle.subjects())
    # What readers get conforms, whatever the store did to the datatypes it keeps.
    assert {o.datatype for o in turtle.objects(None, DCAT.byteSize)} == {  # type: ignore[attr-defined]
        XSD.nonNegativeInteger
    }
    assert validate(read_graphs(store, [ENTRY]), "high").conforms
    for name, report in official_reports(turtle).items():
        assert report.conforms, (name, store, report.text())
    dataset = URIRef(URLS.dataset("measures"))
    assert (URIRef(URLS.catalog), DCAT.dataset, dataset) in turtle
    constructed = store.construct(
        f"CONSTRUCT {{ ?d ?p ?o }} WHERE {{ GRAPH <{ENTRY}> {{ ?d a <{DCAT.Dataset}> ; ?p ?o }} }}"
    )
    assert set(constructed.subjects()) == {dataset}
    with pytest.raises(ValueError, match="unknown catalog syntax"):
        export_catalog(store, "n3", graphs=GRAPHS)
    assert store.ask(f"ASK {{ GRAPH <{ENTRY}> {{ ?s ?p ?o }} }}") is True
    assert store.ask(f"ASK {{ GRAPH <{FOREIGN}> {{ <urn:x:none> ?p ?o }} }}") is False


def test_bad_requests_are_refused_clearly(store: TripleStore) -> None:
    with pytest.raises(TripleStoreError):
        store.select("SELECT nonsense")
    if not (isinstance(store, SparqlEndpointStore) and store.query_url == store.update_url):
        # Virtuoso answers queries and updates at one URL, and runs either: Herald sends
        # its query side nothing but queries it wrote or parsed (see /v1/sparql).
        with pytest.raises(TripleStoreError):
            store.select("DELETE WHERE { ?s ?p ?o }")  # the query side is read-only
    with pytest.raises(TripleStoreError, match="not a SELECT"):
        store.select("ASK {}")
    with pytest.raises(ValueError, match="absolute IRI"):
        replace_entry(store, "no iri> } ; DROP ALL ; #", _entry(1))
    with pytest.raises(ValueError, match="at least one triple"):
        replace_entry(store, ENTRY, Graph())


def test_concurrent_readers_always_see_exactly_one_copy(store: TripleStore) -> None:
    replace_entry(store, ENTRY, _entry(1))
    updates = [replace_update(ENTRY, _entry(v).serialize(format="nt")) for v in range(2, 42)]
    seen_by_readers: list[list[dict[str, str]]] = []
    errors: list[BaseException] = []
    done = threading.Event()
    started = [threading.Event() for _ in range(3)]

    def read(started: threading.Event) -> None:
        try:
            while True:
                seen_by_readers.append(store.select(COPIES))
                started.set()
                if done.is_set():
                    return
        except BaseException as exc:  # surfaced by the assertions below
            errors.append(exc)
            started.set()

    readers = [threading.Thread(target=read, args=(event,)) for event in started]
    for reader in readers:
        reader.start()
    seen_by_writer: list[list[dict[str, str]]] = []
    try:
        for event in started:  # every reader is running before the replaces begin
            event.wait(timeout=60)
        for update in updates:
            store.update(update)
            seen_by_writer.append(store.select(COPIES))
    finally:
        done.set()
        for reader in readers:
            reader.join()
    assert errors == []
    assert len(seen_by_readers) > len(readers)
    bad = [rows for rows in seen_by_readers if len(rows) != 1 or rows[0]["n"] != "3"]
    assert bad == [], f"{len(bad)} of {len(seen_by_readers)} reads saw zero or two copies"
    assert seen_by_writer == [[{"v": str(v), "n": "3"}] for v in range(2, 42)]


def test_an_embedded_store_has_one_opener(tmp_path: Path) -> None:
    first = OxigraphStore(tmp_path / "store")
    try:
        with pytest.raises(TripleStoreError, match="cannot open the triple store"):
            OxigraphStore(tmp_path / "store")
    finally:
        first.close()
