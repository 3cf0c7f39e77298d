"""Regression tests for the SPARQL endpoint findings, against a real server on loopback.

Each query runs in a child process: these tests spawn processes, hence ``slow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from herald import Settings
from herald.api import ApiSettings, create_app
from herald.catalog.pipeline import catalog_runtime, close_embedded_store
from herald.catalog.triplestore import SparqlEndpointStore
from herald.up import _server
from tests.eventually import eventually
from tests.security.conftest import catalog_app, problem

pytestmark = pytest.mark.slow

GRAPHS = 4
PER_GRAPH = 50


@dataclass
class Served:
    http: httpx.AsyncClient
    url: str
    server: uvicorn.Server
    serving: asyncio.Task[None]
    asgi: Any

    @property
    def children(self) -> list[int]:
        """Live query processes of the runner."""
        runner = self.asgi.state.sparql
        return [c.proc.pid for c in [*runner._idle, *runner._busy] if c.alive]


def _seed(app: Any) -> None:
    store = catalog_runtime(app).triple_store
    for g in range(GRAPHS):
        triples = " ".join(
            f'<http://ex.org/s{g}-{i}> <http://ex.org/p> "value {i}" .' for i in range(PER_GRAPH)
        )
        store.update(f"INSERT DATA {{ GRAPH <http://ex.org/g{g}> {{ {triples} }} }}")


@pytest.fixture
async def served(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    monkeypatch.setenv("HERALD_SPARQL_TIMEOUT", "3")
    monkeypatch.setenv("HERALD_SPARQL_MAX_ROWS", "100")
    monkeypatch.setenv("HERALD_SPARQL_MAX_BYTES", "10000")
    monkeypatch.setenv("HERALD_SPARQL_CONCURRENCY", "2")
    local = settings.with_(data_dir=tmp_path / "data", shutdown_grace=3.0)
    app = catalog_app()
    from herald.catalog.pipeline import register_catalog
    from herald.catalog.publishing import CatalogSettings

    register_catalog(app, local, CatalogSettings(public_url="https://data.example.org"))
    _seed(app)
    # These tests bound the evaluator, not a tenant's view: let the request's tenant reach
    # the seeded graphs (which graphs a tenant sees is tested in tests/catalog/test_tenants.py).
    seeded = [f"http://ex.org/g{g}" for g in range(GRAPHS)]

    async def seeded_graphs(state: Any) -> list[str]:
        return seeded

    monkeypatch.setattr("herald.api.catalog_rdf._tenant_graphs", seeded_graphs)
    asgi = create_app(app, local, ApiSettings(auth=False))
    server = _server(asgi, "127.0.0.1", 0, False, grace=local.shutdown_grace)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not serving.done(), "the server stopped during start-up"
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            yield Served(http, url, server, serving, asgi)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)
        close_embedded_store(local)


async def sparql(served: Served, query: str, **headers: str) -> httpx.Response:
    return await served.http.post(
        "/v1/sparql",
        content=query,
        headers={"Content-Type": "application/sparql-query", **headers},
    )


CROSS = (
    "SELECT (COUNT(*) AS ?n) WHERE { "
    + " ".join(f"GRAPH ?g{i} {{ ?s{i} ?p{i} ?o{i} }}" for i in range(6))
    + " }"
)


async def test_a_crashing_query_takes_only_its_own_process_down(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    chain = "SELECT * WHERE { FILTER(" + "+".join(["1"] * 8000) + ") }"
    refused = await sparql(served, chain)
    assert refused.status_code in (400, 413)  # too deep (or too long) for the endpoint
    # With the bounds lifted, the evaluator overflows its stack: its process dies alone.
    runner = served.asgi.state.sparql
    runner.limits = type(runner.limits)(max_query=10**6, max_depth=10**6, timeout=30)
    crashed = await sparql(served, chain)
    problem(crashed, 422, "query-too-costly")
    ok = await sparql(served, "ASK { GRAPH ?g { ?s ?p ?o } }")
    assert ok.status_code == 200 and ok.json()["boolean"] is True


class _Listener(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"SECRET-BODY-OF-ANOTHER-SERVER")

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    _Listener.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Listener.hits
    finally:
        server.shutdown()
        server.server_close()


async def test_federation_is_refused_and_nothing_is_called(
    served: Served, listener: tuple[str, list[str]]
) -> None:
    target, hits = listener
    for query in (
        f"SELECT * WHERE {{ SERVICE <{target}/sparql> {{ ?s ?p ?o }} }}",
        f"select * where {{ service silent <{target}/x> {{ ?s ?p ?o }} }}",
        "SELECT * WHERE { SERVICE <file:///etc/passwd> { ?s ?p ?o } }",
        f"SELECT * FROM <{target}/data.ttl> WHERE {{ ?s ?p ?o }}",
        f"SELECT * FROM NAMED <{target}/g> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ \\u0053ERVICE <{target}/u> {{ ?s ?p ?o }} }}",
    ):
        problem(await sparql(served, query), 400, "federation-refused")
    assert hits == []


async def test_time_rows_bytes_and_memory_are_bounded(served: Served) -> None:
    started = time.monotonic()
    problem(await sparql(served, CROSS), 504, "timeout")
    assert time.monotonic() - started < 10
    rows = "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }"  # 200 rows, over the 100 allowed
    problem(await sparql(served, rows), 422, "result-too-large")
    big = "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 90"  # under 100 rows, over 10 kB
    assert (await sparql(served, big)).status_code == 422
    construct = "CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } }"
    problem(await sparql(served, construct, Accept="text/turtle"), 422, "result-too-large")
    doubling = (
        'SELECT ?a30 WHERE { BIND("aaaaaaaaaa" AS ?a0) '
        + " ".join(f"BIND(CONCAT(?a{i}, ?a{i}) AS ?a{i + 1})" for i in range(30))
        + " }"
    )
    assert (await sparql(served, doubling)).status_code in (422, 504)
    small = await sparql(served, "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } } LIMIT 3")
    assert small.status_code == 200 and len(small.json()["results"]["bindings"]) == 3


async def test_concurrency_is_bounded_with_retry_after(served: Served) -> None:
    slow = [asyncio.create_task(sparql(served, CROSS)) for _ in range(2)]
    await asyncio.sleep(1.0)
    busy = await sparql(served, "ASK { ?s ?p ?o }")
    problem(busy, 503, "busy")
    assert int(busy.headers["retry-after"]) >= 1
    for task in slow:
        assert (await task).status_code == 504


async def test_a_query_stops_when_its_client_goes_away(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=0.8) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            await impatient.post(
                "/v1/sparql", content=CROSS, headers={"Content-Type": "application/sparql-query"}
            )
    await asyncio.sleep(1.0)  # well before the query's own 3 s deadline
    assert served.asgi.state.sparql._running == 0 and served.children == []


async def test_shutdown_completes_within_its_grace_while_a_query_runs(served: Served) -> None:
    served.asgi.state.sparql.limits = type(served.asgi.state.sparql.limits)(timeout=120)
    query = asyncio.create_task(sparql(served, CROSS))

    async def children() -> list[int]:
        return served.children

    pids = await eventually(children, what="the query's child process", within=20)
    await asyncio.sleep(0.5)  # the query is running in it
    started = time.monotonic()
    served.server.should_exit = True
    await asyncio.wait_for(served.serving, 30)
    assert time.monotonic() - started < 3.0 + 3.0  # the grace, and a margin for load
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with contextlib.suppress(httpx.HTTPError):
        await query  # the server closed the connection


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_remote_store_is_bounded_the_same_way(
    settings: Settings, tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    """A real Oxigraph server behind HERALD_SPARQL_QUERY_URL; a dead one; one that fails."""
    port = _free_port()
    binary = Path(sys.executable).parent / "oxigraph"  # the oxigraph package's server
    proc = await asyncio.create_subprocess_exec(
        str(binary),
        "serve",
        "--location",
        str(tmp_path / "remote"),
        "--bind",
        f"127.0.0.1:{port}",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as http:
            for _ in range(200):
                try:
                    await http.get(f"{base}/query?query=ASK%7B%7D")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            await http.post(
                f"{base}/update",
                content="INSERT DATA { GRAPH <http://ex.org/g> "
                '{ <http://ex.org/s> <http://ex.org/p> "o" } }',
                headers={"Content-Type": "application/sparql-update"},
            )
        from herald.catalog.sparql.guard import QueryRefused
        from herald.catalog.sparql.runner import QueryRunner, SparqlLimits

        runner = QueryRunner(SparqlLimits(timeout=3), {})
        try:
            good = await runner.run(
                SparqlEndpointStore(f"{base}/query", f"{base}/update"),
                "SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } }",
                "SELECT",
                "application/sparql-results+json",
            )
            assert b'"value": "o"' in good.path.read_bytes()
            target, _hits = listener
            for url, status in ((f"http://127.0.0.1:{_free_port()}/q", 503), (target, 503)):
                with pytest.raises(QueryRefused) as refused:
                    await runner.run(SparqlEndpointStore(url, url), "ASK { ?s ?p ?o }", "ASK", "x")
                assert refused.value.status == status
                assert "SECRET" not in refused.value.detail
            bad = SparqlEndpointStore(f"{base}/query", f"{base}/update")
            with pytest.raises(QueryRefused) as invalid:
                await runner.run(bad, "SELECT * WHERE { ?s ?p }", "SELECT", "x")
            assert invalid.value.status == 400 and "HTTP 400" in invalid.value.detail
        finally:
            await runner.close()
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
