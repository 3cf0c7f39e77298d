"""The catalog's triple store: embedded Oxigraph or any SPARQL 1.1 endpoint over HTTP.

Each catalog entry lives in its own named graph. Replacing an entry is ONE SPARQL
Update request that drops the graph and inserts the new copy; the store applies a
request as one transaction, so a reader sees the old copy or the new one, never none
and never both. Reads are plain SPARQL queries (entries are in named graphs: query
them with ``GRAPH``). The whole catalog exports as Turtle, JSON-LD or RDF/XML.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import pyoxigraph
from rdflib import Graph

from herald.catalog.errors import TripleStoreError
from herald.catalog.metadata import PREFIXES, restore_datatypes
from herald.catalog.sparql.child import boolean_answer
from herald.config import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RdfSyntax:
    name: str
    media_type: str
    rdflib_format: str


CATALOG_SYNTAXES: dict[str, RdfSyntax] = {
    s.name: s
    for s in (
        RdfSyntax("turtle", "text/turtle", "turtle"),
        RdfSyntax("json-ld", "application/ld+json", "json-ld"),
        RdfSyntax("rdf-xml", "application/rdf+xml", "xml"),
    )
}

_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]+")


def _graph_iri(graph: str) -> str:
    if not _IRI.fullmatch(graph):
        raise ValueError(f"entry graph must be an absolute IRI, got {graph!r}")
    return graph


def replace_update(graph: str, ntriples: str) -> str:
    """The single SPARQL Update that swaps a named graph's content for ``ntriples``."""
    iri = _graph_iri(graph)
    return f"DROP SILENT GRAPH <{iri}> ;\nINSERT DATA {{ GRAPH <{iri}> {{\n{ntriples}\n}} }}"


def delete_update(graph: str) -> str:
    return f"DROP SILENT GRAPH <{_graph_iri(graph)}>"


class TripleStore(Protocol):
    def update(self, sparql: str) -> None:
        """Run one SPARQL Update request, atomically."""
        ...

    def select(self, sparql: str) -> list[dict[str, str]]:
        """Rows of a SELECT query: variable name -> lexical value (unbound omitted)."""
        ...

    def ask(self, sparql: str) -> bool: ...

    def construct(self, sparql: str) -> Graph: ...

    def results_json(self, sparql: str) -> bytes:
        """A SELECT or ASK answer as SPARQL 1.1 Query Results JSON (typed terms)."""
        ...

    def close(self) -> None: ...


def replace_entry(store: TripleStore, graph: str, entry: Graph) -> None:
    """Atomically make ``entry`` the only content of the named graph ``graph``."""
    if len(entry) == 0:
        raise ValueError("an entry needs at least one triple (use delete_entry to remove it)")
    store.update(replace_update(graph, entry.serialize(format="nt")))


def delete_entry(store: TripleStore, graph: str) -> None:
    """Remove an entry; removing a missing entry is not an error."""
    store.update(delete_update(graph))


def read_graphs(store: TripleStore, graphs: Sequence[str]) -> Graph:
    """The named graphs ``graphs`` merged into one, as a reader gets them: with the
    datatypes DCAT-AP prescribes restored where the store canonicalised them."""
    if isinstance(graphs, str):
        raise TypeError("graphs is a sequence of graph IRIs, not one string")
    if not graphs:
        return Graph()
    names = " ".join(f"<{_graph_iri(g)}>" for g in graphs)
    query = f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ VALUES ?g {{ {names} }} GRAPH ?g {{ ?s ?p ?o }} }}"
    return restore_datatypes(store.construct(query))


def export_catalog(
    store: TripleStore,
    syntax: str = "turtle",
    *,
    graphs: Sequence[str],
    extra: Graph | None = None,
) -> bytes:
    """The named graphs ``graphs`` (the catalog's description and the entries Herald
    wrote: nothing else a shared store holds), merged into one graph with ``extra``
    (triples made for this answer), in ``turtle``, ``json-ld`` or ``rdf-xml``."""
    try:
        chosen = CATALOG_SYNTAXES[syntax]
    except KeyError:
        known = ", ".join(CATALOG_SYNTAXES)
        raise ValueError(f"unknown catalog syntax {syntax!r} (known: {known})") from None
    graph = read_graphs(store, graphs)
    if extra is not None:
        graph += extra
    for prefix, namespace in PREFIXES.items():
        graph.bind(prefix, namespace)
    return graph.serialize(format=chosen.rdflib_format, encoding="utf-8")


def _from_ntriples(data: bytes) -> Graph:
    graph = Graph()
    graph.parse(data=data.decode("utf-8"), format="nt")
    return graph


class OxigraphStore:
    """An embedded, on-disk Oxigraph store (one process opens a location at a time)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.generation = 0  # counts updates: a read snapshot older than it is stale
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
        try:
            self._store = pyoxigraph.Store(str(path) if path is not None else None)
        except OSError as exc:
            raise TripleStoreError(f"cannot open the triple store at {path}: {exc}") from None

    @classmethod
    def for_settings(cls, settings: Settings) -> OxigraphStore:
        return cls(settings.data_dir / "triplestore")

    def update(self, sparql: str) -> None:
        try:
            self._store.update(sparql)
        except (SyntaxError, OSError, ValueError) as exc:
            raise TripleStoreError(f"update refused: {exc}") from None
        finally:
            self.generation += 1

    def backup(self, target: Path) -> None:
        """A consistent copy at ``target`` (hard links where it can), readable by another
        process while this one keeps writing; the SPARQL endpoint's processes read these."""
        try:
            self._store.backup(str(target))
        except OSError as exc:
            raise TripleStoreError(f"cannot snapshot the triple store: {exc}") from None

    def _query(self, sparql: str) -> Any:
        try:
            return self._store.query(sparql)
        except (SyntaxError, OSError, ValueError) as exc:
            raise TripleStoreError(f"query refused: {exc}") from None

    def select(self, sparql: str) -> list[dict[str, str]]:
        result = self._query(sparql)
        if not isinstance(result, pyoxigraph.QuerySolutions):
            raise TripleStoreError("not a SELECT query")
        names = [v.value for v in result.variables]
        rows: list[dict[str, str]] = []
        for solution in result:
            row: dict[str, str] = {}
            for name in names:
                term = solution[name]
                if term is not None:
                    row[name] = term.value
            rows.append(row)
        return rows

    def ask(self, sparql: str) -> bool:
        result = self._query(sparql)
        if not isinstance(result, pyoxigraph.QueryBoolean):
            raise TripleStoreError("not an ASK query")
        return bool(result)

    def construct(self, sparql: str) -> Graph:
        result = self._query(sparql)
        if not isinstance(result, pyoxigraph.QueryTriples):
            raise TripleStoreError("not a CONSTRUCT or DESCRIBE query")
        data = result.serialize(format=pyoxigraph.RdfFormat.N_TRIPLES)
        assert data is not None
        return _from_ntriples(data)

    def results_json(self, sparql: str) -> bytes:
        result = self._query(sparql)
        if not isinstance(result, pyoxigraph.QuerySolutions | pyoxigraph.QueryBoolean):
            raise TripleStoreError("not a SELECT or ASK query")
        data = result.serialize(format=pyoxigraph.QueryResultsFormat.JSON)
        assert data is not None
        return data

    def close(self) -> None:
        self._store.flush()


class SparqlEndpointStore:
    """Any SPARQL 1.1 Query + Update endpoint pair over HTTP (Oxigraph, Fuseki, RDF4J,
    Virtuoso).

    Queries and updates are sent as form-encoded POSTs (``query=`` / ``update=``), the
    one way of the SPARQL 1.1 protocol every server answers (Virtuoso does not answer a
    direct ``application/sparql-query`` POST).
    """

    def __init__(
        self,
        query_url: str,
        update_url: str,
        timeout: float = 30.0,
        auth: tuple[str, str] | None = None,
    ) -> None:
        self.query_url = query_url
        self.update_url = update_url
        self._http = httpx.Client(timeout=timeout, auth=auth)

    def _post(self, url: str, field: str, text: str, accept: str | None) -> httpx.Response:
        headers = {"Accept": accept} if accept else {}
        try:
            response = self._http.post(url, data={field: text}, headers=headers)
        except httpx.HTTPError as exc:
            raise TripleStoreError(f"SPARQL endpoint {url} unreachable: {exc}") from None
        if response.status_code >= 400:
            # Its body stays in the log: errors reach API callers, who must never read
            # what another server answered.
            log.warning(
                "SPARQL endpoint %s answered %d: %.500s",
                url,
                response.status_code,
                response.text.strip(),
            )
            raise TripleStoreError(f"SPARQL endpoint {url} answered {response.status_code}")
        return response

    def update(self, sparql: str) -> None:
        self._post(self.update_url, "update", sparql, None)

    def _results(self, sparql: str) -> dict[str, Any]:
        response = self._post(self.query_url, "query", sparql, "application/sparql-results+json")
        try:
            data = response.json()
        except ValueError:
            raise TripleStoreError("the endpoint did not answer with SPARQL JSON results") from None
        if not isinstance(data, dict):
            raise TripleStoreError("the endpoint did not answer with SPARQL JSON results")
        return data

    def select(self, sparql: str) -> list[dict[str, str]]:
        data = boolean_answer(self._results(sparql))
        if "results" not in data:
            raise TripleStoreError("not a SELECT query")
        return [
            {name: str(term["value"]) for name, term in binding.items()}
            for binding in data["results"]["bindings"]
        ]

    def ask(self, sparql: str) -> bool:
        data = boolean_answer(self._results(sparql))
        if "boolean" not in data:
            raise TripleStoreError("not an ASK query")
        return bool(data["boolean"])

    def construct(self, sparql: str) -> Graph:
        response = self._post(self.query_url, "query", sparql, "application/n-triples")
        return _from_ntriples(response.content)

    def results_json(self, sparql: str) -> bytes:
        data = boolean_answer(self._results(sparql))
        if "results" not in data and "boolean" not in data:
            raise TripleStoreError("not a SELECT or ASK query")
        return json.dumps(data).encode("utf-8")

    def close(self) -> None:
        self._http.close()
