"""Triple store backends: embedded Oxigraph and Oxigraph's own server over HTTP."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import httpx
import pyoxigraph
import pytest
from rdflib import Graph, URIRef

from herald.catalog.errors import TripleStoreError
from herald.catalog.metadata import DCAT, render_catalog, render_entry
from herald.catalog.triplestore import (
    OxigraphStore,
    SparqlEndpointStore,
    TripleStore,
    delete_entry,
    export_catalog,
    replace_entry,
    replace_update,
)
from tests.catalog.samples import CATALOG, HIGH_DATASET, ISSUED, MODIFIED, URLS, files

ENTRY = URLS.entry_graph("measures")
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


def _oxigraph_binary() -> str:
    found = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    assert Path(found).exists(), "the oxigraph server (PyPI package oxigraph) is required"
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def oxigraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    location = tmp_path_factory.mktemp("oxigraph-server")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with subprocess.Popen(
        [_oxigraph_binary(), "serve", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as server:
        try:
            deadline = time.monotonic() + 30
            while True:  # wait until it answers (a readiness wait, not a speed check)
                try:
                    httpx.post(
                        f"{base}/query",
                        content=b"ASK {}",
                        headers={"Content-Type": "application/sparql-query"},
                    ).raise_for_status()
                    break
                except httpx.HTTPError:
                    assert server.poll() is None, "oxigraph server exited"
                    assert time.monotonic() < deadline, "oxigraph server did not start"
                    time.sleep(0.1)
            yield base
        finally:
            server.terminate()
            server.wait()


@pytest.fixture(params=["embedded", "http"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TripleStore]:
    backend: TripleStore
    if request.param == "embedded":
        backend = OxigraphStore(tmp_path / "store")
    else:
        base = request.getfixturevalue("oxigraph_server")
        backend = SparqlEndpointStore(f"{base}/query", f"{base}/update")
        backend.update("DROP SILENT ALL")  # the server is shared by this module's tests
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
    expected = len(render_catalog(CATALOG, URLS) + _entry(2))
    turtle = Graph().parse(data=export_catalog(store, "turtle"), format="turtle")
    jsonld = _parsed_by_oxigraph(export_catalog(store, "json-ld"), pyoxigraph.RdfFormat.JSON_LD)
    rdfxml = Graph().parse(data=export_catalog(store, "rdf-xml"), format="xml")
    assert len(turtle) == len(jsonld) == len(rdfxml) == expected
    assert turtle.isomorphic(jsonld) and turtle.isomorphic(rdfxml)
    assert isinstance(json.loads(export_catalog(store, "json-ld")), list | dict)
    assert ET.fromstring(export_catalog(store, "rdf-xml")).tag.endswith("RDF")
    dataset = URIRef(URLS.dataset("measures"))
    assert (URIRef(URLS.catalog), DCAT.dataset, dataset) in turtle
    constructed = store.construct(
        f"CONSTRUCT {{ ?d ?p ?o }} WHERE {{ GRAPH <{ENTRY}> {{ ?d a <{DCAT.Dataset}> ; ?p ?o }} }}"
    )
    assert set(constructed.subjects()) == {dataset}
    with pytest.raises(ValueError, match="unknown catalog syntax"):
        export_catalog(store, "n3")


def test_bad_requests_are_refused_clearly(store: TripleStore) -> None:
    with pytest.raises(TripleStoreError):
        store.select("SELECT nonsense")
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
