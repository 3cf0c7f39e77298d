"""``/v1/catalog`` and ``/v1/sparql``: RDF by content negotiation, read-only SPARQL.

A query is checked before anything runs it (:mod:`herald.catalog.sparql.guard`): only the
four query forms (SELECT, ASK, CONSTRUCT, DESCRIBE), no federation, bounded size and
depth; an update, in whatever parameter or body it comes, is refused with 400. It then
runs in a query process of its own (:mod:`herald.catalog.sparql.runner`) under memory,
CPU, time, row and byte limits, and is stopped when the caller goes away.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import FileResponse
from rdflib import Graph
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from herald.api.auth import Principal, require
from herald.api.problems import Problem, responses
from herald.api.state import ApiState, State
from herald.catalog.metadata import PREFIXES, combined_description, restore_datatypes
from herald.catalog.pipeline import (
    catalog_graphs,
    catalog_runtime,
    combined_catalog_graphs,
    shared_triple_store,
)
from herald.catalog.publishing import CatalogSettings
from herald.catalog.sparql.guard import QueryRefused, check_query
from herald.catalog.sparql.runner import QueryRunner, SparqlLimits
from herald.catalog.store import ExportStore, LocalExportStore
from herald.catalog.triplestore import CATALOG_SYNTAXES, TripleStore, export_catalog

router = APIRouter(tags=["catalog"])
Reader = Annotated[Principal, Depends(require("read"))]

# Media type -> the catalog's syntax name; the first is the default.
RDF_SYNTAXES: dict[str, str] = {s.media_type: s.name for s in CATALOG_SYNTAXES.values()}
RESULTS_JSON = "application/sparql-results+json"


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


def _problem(refused: QueryRefused) -> Problem:
    headers = {"Retry-After": str(refused.retry_after)} if refused.retry_after else None
    return Problem(refused.status, refused.slug, refused.detail, headers=headers)


def query_form(text: str, limits: SparqlLimits | None = None) -> str:
    """SELECT, ASK, CONSTRUCT or DESCRIBE; a problem for an update, federation, a query
    too long or too deep, or invalid text."""
    limits = limits or SparqlLimits()
    try:
        return check_query(text, max_chars=limits.max_query, max_depth=limits.max_depth).form
    except QueryRefused as refused:
        raise _problem(refused) from None


async def run_sparql(
    request: Request,
    runner: QueryRunner,
    store: TripleStore,
    text: str,
    graphs: list[str] | None = None,
) -> Response:
    form = query_form(text, runner.limits)
    accept = request.headers.get("accept")
    if form in ("SELECT", "ASK"):
        negotiate(accept, [RESULTS_JSON, "application/json"])
        media = RESULTS_JSON
    else:
        media = negotiate(accept, list(RDF_SYNTAXES))
    running = asyncio.create_task(runner.run(store, text, form, media, graphs))
    try:
        while not running.done():  # a caller who left stops its query
            await asyncio.wait({running}, timeout=0.25)
            if not running.done() and await request.is_disconnected():
                running.cancel()
                raise Problem(400, "client-gone", "the client closed the connection")
        result = running.result()
    except QueryRefused as refused:
        raise _problem(refused) from None
    finally:
        if not running.done():  # cancelled itself (shutdown): the query process goes too
            running.cancel()
    return FileResponse(
        result.path,
        media_type=media,
        headers={"Vary": "Accept"},
        background=BackgroundTask(result.path.unlink, missing_ok=True),
    )


async def query_from_body(request: Request) -> str:
    """The query of a POST: a form's ``query`` field or an application/sparql-query body."""
    limit = 4 * sparql_runner(request).limits.max_query  # form-encoding may quadruple it
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Problem(413, "payload-too-large", "the request body is too large for a query")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
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


def sparql_runner(request: Request) -> QueryRunner:
    """The API's pool of query processes (made by its lifespan)."""
    runner = getattr(request.app.state, "sparql", None)
    if not isinstance(runner, QueryRunner):
        raise Problem(503, "unavailable", "the SPARQL endpoint is not running")
    return runner


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


def _catalog_doc(description: str, *codes: int) -> dict[int | str, Any]:
    return {
        **responses(*codes),
        200: {"description": description, "content": {m: {} for m in RDF_SYNTAXES}},
    }


async def _graphs_answer(
    request: Request, state: ApiState, graphs: list[str], extra: Graph | None = None
) -> Response:
    """The named graphs ``graphs`` (and ``extra``) in the syntax the request accepts."""
    chosen = negotiate(request.headers.get("accept"), list(RDF_SYNTAXES))
    _files, triples = stores(state)
    body = await run_in_threadpool(
        partial(export_catalog, triples, RDF_SYNTAXES[chosen], graphs=graphs, extra=extra)
    )
    return Response(body, media_type=chosen, headers={"Vary": "Accept"})


@router.get(
    "/v1/catalog",
    responses=_catalog_doc("The catalog", 401, 403, 406),
    summary="The whole catalog as Turtle, JSON-LD or RDF/XML (by Accept)",
)
async def catalog(request: Request, state: State, _: Reader) -> Response:
    async with state.client.pool.connection() as conn:
        graphs = await catalog_graphs(conn, catalog_settings(state).urls)
    return await _graphs_answer(request, state, graphs)


@router.get(
    "/v1/catalog/combined",
    responses=_catalog_doc("The combined catalog", 401, 403, 404, 406),
    summary="Every tenant's published datasets, each under its tenant's catalog (if configured)",
)
async def combined_catalog(request: Request, state: State, _: Reader) -> Response:
    settings = catalog_settings(state)
    if not settings.combined:
        raise Problem(
            404, "not-found", "the combined catalog is not offered (HERALD_CATALOG_COMBINED)"
        )
    async with state.client.pool.connection() as conn:
        tenants, graphs = await combined_catalog_graphs(conn, settings.urls)
    extra = combined_description(settings.urls, settings.title, tenants)
    return await _graphs_answer(request, state, graphs, extra)


SPARQL_DOC = (
    "Read-only SPARQL 1.1 query: SELECT and ASK answer SPARQL JSON results, CONSTRUCT and "
    "DESCRIBE answer Turtle, JSON-LD or RDF/XML by Accept. Entries live in named graphs "
    "(query them with GRAPH). Any update is refused with 400, and so are SERVICE and "
    "dataset clauses (FROM). Each query runs in a process of its own under limits "
    "(HERALD_SPARQL_*): query size (413) and depth (400), rows and bytes of the result "
    "(422), time (504); when all query slots are taken the answer is 503 with Retry-After."
)


@router.get(
    "/v1/sparql",
    responses=responses(400, 401, 403, 406, 413, 422, 503, 504),
    summary="SPARQL query (read-only)",
    description=SPARQL_DOC,
)
async def sparql_get(
    request: Request,
    state: State,
    _: Reader,
    query: Annotated[str | None, Query()] = None,
    update: Annotated[str | None, Query()] = None,
) -> Response:
    if update is not None:
        raise Problem(400, "update-refused", "this endpoint is read-only: updates are refused")
    if query is None:
        raise Problem(400, "invalid-query", "give the SPARQL query in the 'query' parameter")
    _files, triples = stores(state)
    graphs = await _tenant_graphs(state)
    return await run_sparql(request, sparql_runner(request), triples, query, graphs)


@router.post(
    "/v1/sparql",
    responses=responses(400, 401, 403, 406, 413, 415, 422, 503, 504),
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
    graphs = await _tenant_graphs(state)
    return await run_sparql(request, sparql_runner(request), triples, text, graphs)


async def _tenant_graphs(state: ApiState) -> list[str]:
    """The graphs the request's tenant may query: its catalog and its published entries
    (read under row-level security, so another tenant's never appear)."""
    async with state.client.pool.connection() as conn:
        return await catalog_graphs(conn, catalog_settings(state).urls)
