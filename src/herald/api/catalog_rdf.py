"""``/v1/catalog`` and ``/v1/sparql``: RDF by content negotiation, read-only SPARQL.

A query is parsed before it reaches the store, so only the four query forms (SELECT,
ASK, CONSTRUCT, DESCRIBE) ever run; an update, in whatever parameter or body it comes,
is refused with 400 and never sent to the store.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Query, Request, Response
from pyparsing import ParseBaseException
from rdflib import Graph
from rdflib.plugins.sparql.parser import parseQuery, parseUpdate
from starlette.concurrency import run_in_threadpool

from herald.api.auth import Principal, require
from herald.api.problems import Problem, responses
from herald.api.state import ApiState, State
from herald.catalog.errors import TripleStoreError
from herald.catalog.metadata import PREFIXES, restore_datatypes
from herald.catalog.pipeline import catalog_graphs, catalog_runtime, shared_triple_store
from herald.catalog.publishing import CatalogSettings
from herald.catalog.store import ExportStore, LocalExportStore
from herald.catalog.triplestore import CATALOG_SYNTAXES, TripleStore, export_catalog

router = APIRouter(tags=["catalog"])
Reader = Annotated[Principal, Depends(require("read"))]

# Media type -> the catalog's syntax name; the first is the default.
RDF_SYNTAXES: dict[str, str] = {s.media_type: s.name for s in CATALOG_SYNTAXES.values()}
RESULTS_JSON = "application/sparql-results+json"
MAX_QUERY = 100_000  # characters


def _accepted(header: str) -> list[tuple[str, float]]:
    """(media range, quality) for each entry of an Accept header."""
    found = []
    for part in header.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        if not media:
            continue
        quality = 1.0
        for param in fields[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    quality = 0.0
        found.append((media, quality))
    return found


def _specificity(media_range: str, offered: str) -> int:
    """How closely ``media_range`` names ``offered``: -1 not at all, 2 exactly."""
    if media_range == offered:
        return 2
    kind, _, sub = media_range.partition("/")
    if sub == "*" and offered.startswith(kind + "/"):
        return 1
    return 0 if media_range in ("*/*", "*") else -1


def negotiate(header: str | None, offered: list[str]) -> str:
    """The offered media type the Accept header prefers (the first one if absent);
    406 problem if it accepts none of them."""
    if header is None or not header.strip():
        return offered[0]
    ranges = _accepted(header)
    best: tuple[float, int] | None = None
    chosen = None
    for rank, media in enumerate(offered):
        # The most specific range naming a type sets its quality (q=0 refuses it).
        matching = [(_specificity(r, media), q) for r, q in ranges]
        matching = [m for m in matching if m[0] >= 0]
        if not matching:
            continue
        quality = max(matching)[1]
        if quality > 0 and (best is None or (quality, -rank) > best):
            best, chosen = (quality, -rank), media
    if chosen is None:
        raise Problem(
            406,
            "not-acceptable",
            f"cannot answer {header!r}; available: {', '.join(offered)}",
            available=offered,
        )
    return chosen


async def rdf_response(graph: Graph, media_type: str) -> Response:
    restore_datatypes(graph)  # what the store canonicalised, as the catalog serves it
    for prefix, namespace in PREFIXES.items():
        graph.bind(prefix, namespace)
    syntax = CATALOG_SYNTAXES[RDF_SYNTAXES[media_type]]
    body = await run_in_threadpool(graph.serialize, format=syntax.rdflib_format, encoding="utf-8")
    return Response(body, media_type=media_type, headers={"Vary": "Accept"})


def query_form(text: str) -> str:
    """SELECT, ASK, CONSTRUCT or DESCRIBE; 400 problem for an update or invalid text."""
    if len(text) > MAX_QUERY:
        raise Problem(400, "invalid-query", f"a query may have at most {MAX_QUERY} characters")
    if "\x00" in text:
        raise Problem(400, "invalid-query", "a query cannot contain NUL characters")
    try:
        parsed = parseQuery(text)
    except (ParseBaseException, RecursionError) as error:
        try:
            parseUpdate(text)
        except (ParseBaseException, RecursionError):
            raise Problem(400, "invalid-query", f"not a SPARQL query: {error}") from None
        raise Problem(
            400, "update-refused", "this endpoint is read-only: SPARQL updates are refused"
        ) from None
    form = str(parsed[1].name).removesuffix("Query").upper()
    if form not in ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE"):
        raise Problem(400, "invalid-query", f"unsupported query form {form}")
    return form


async def run_sparql(store: TripleStore, text: str, accept: str | None) -> Response:
    form = await run_in_threadpool(query_form, text)
    if form in ("SELECT", "ASK"):
        negotiate(accept, [RESULTS_JSON, "application/json"])
        try:
            body = await run_in_threadpool(store.results_json, text)
        except TripleStoreError as exc:
            raise Problem(400, "query-failed", str(exc)) from None
        return Response(body, media_type=RESULTS_JSON)
    chosen = negotiate(accept, list(RDF_SYNTAXES))
    try:
        graph = await run_in_threadpool(store.construct, text)
    except TripleStoreError as exc:
        raise Problem(400, "query-failed", str(exc)) from None
    return await rdf_response(graph, chosen)


async def query_from_body(request: Request) -> str:
    """The query of a POST: a form's ``query`` field or an application/sparql-query body."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > 4 * MAX_QUERY:
        raise Problem(413, "payload-too-large", "the request body is too large for a query")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > 4 * MAX_QUERY:
            raise Problem(413, "payload-too-large", "the request body is too large for a query")
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Problem(400, "invalid-query", "the request body is not UTF-8 text") from None
    if media == "application/sparql-update":
        raise Problem(400, "update-refused", "this endpoint is read-only: updates are refused")
    if media == "application/sparql-query":
        return body
    if media == "application/x-www-form-urlencoded":
        fields = parse_qs(body, keep_blank_values=True)
        if "update" in fields:
            raise Problem(400, "update-refused", "this endpoint is read-only: updates are refused")
        queries = fields.get("query", [])
        if len(queries) != 1:
            raise Problem(400, "invalid-query", "give exactly one 'query' field")
        return queries[0]
    raise Problem(
        415,
        "unsupported-media-type",
        "send application/sparql-query or an application/x-www-form-urlencoded 'query'",
    )


_ENDPOINTS: dict[tuple[str, str], TripleStore] = {}


def stores(state: ApiState) -> tuple[ExportStore, TripleStore]:
    """The stores the catalog jobs of this application use (shared in this process)."""
    try:
        runtime = catalog_runtime(state.app)
    except LookupError:  # an API in front of workers elsewhere: the configured stores
        return LocalExportStore.for_settings(state.settings), _configured_store(state)
    return runtime.export_store, runtime.triple_store


def catalog_settings(state: ApiState) -> CatalogSettings:
    """The catalog settings of this application's jobs, else the environment's."""
    try:
        return catalog_runtime(state.app).catalog
    except LookupError:
        return CatalogSettings.from_env()


def _configured_store(state: ApiState) -> TripleStore:
    catalog = CatalogSettings.from_env()
    if catalog.sparql_query_url and catalog.sparql_update_url:
        # One HTTP client per endpoint for the life of the process, not one per request.
        key = (catalog.sparql_query_url, catalog.sparql_update_url)
        if key not in _ENDPOINTS:
            _ENDPOINTS[key] = catalog.open_triple_store(state.settings)
        return _ENDPOINTS[key]
    return shared_triple_store(state.settings, catalog)


@router.get(
    "/v1/catalog",
    responses={
        **responses(401, 403, 406),
        200: {"description": "The catalog", "content": {m: {} for m in RDF_SYNTAXES}},
    },
    summary="The whole catalog as Turtle, JSON-LD or RDF/XML (by Accept)",
)
async def catalog(request: Request, state: State, _: Reader) -> Response:
    chosen = negotiate(request.headers.get("accept"), list(RDF_SYNTAXES))
    _files, triples = stores(state)
    async with state.client.pool.connection() as conn:
        graphs = await catalog_graphs(conn, catalog_settings(state).urls)
    body = await run_in_threadpool(
        partial(export_catalog, triples, RDF_SYNTAXES[chosen], graphs=graphs)
    )
    return Response(body, media_type=chosen, headers={"Vary": "Accept"})


SPARQL_DOC = (
    "Read-only SPARQL 1.1 query: SELECT and ASK answer SPARQL JSON results, CONSTRUCT and "
    "DESCRIBE answer Turtle, JSON-LD or RDF/XML by Accept. Entries live in named graphs "
    "(query them with GRAPH). Any update is refused with 400."
)


@router.get(
    "/v1/sparql",
    responses=responses(400, 401, 403, 406, 422),
    summary="SPARQL query (read-only)",
    description=SPARQL_DOC,
)
async def sparql_get(
    request: Request,
    state: State,
    _: Reader,
    query: Annotated[str | None, Query(max_length=100_000)] = None,
    update: Annotated[str | None, Query(max_length=100_000)] = None,
) -> Response:
    if update is not None:
        raise Problem(400, "update-refused", "this endpoint is read-only: updates are refused")
    if query is None:
        raise Problem(400, "invalid-query", "give the SPARQL query in the 'query' parameter")
    _files, triples = stores(state)
    return await run_sparql(triples, query, request.headers.get("accept"))


@router.post(
    "/v1/sparql",
    responses=responses(400, 401, 403, 406, 413, 415, 422),
    summary="SPARQL query (read-only), form-encoded or as application/sparql-query",
    description=SPARQL_DOC,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/sparql-query": {"schema": {"type": "string"}},
                "application/x-www-form-urlencoded": {
                    "schema": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                    }
                },
            },
        }
    },
)
async def sparql_post(request: Request, state: State, _: Reader) -> Response:
    text = await query_from_body(request)
    _files, triples = stores(state)
    return await run_sparql(triples, text, request.headers.get("accept"))
