"""The catalog over HTTP, end to end: a real server on a loopback port, a real worker in
this process, real PostgreSQL, the embedded triple store and the local export store."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph
import pytest
import uvicorn

from herald import Herald, Settings, Worker
from herald.api import ApiSettings, create_app, create_key
from herald.api.catalog_downloads import ByteRange, Unsatisfiable, parse_range
from herald.api.catalog_rdf import negotiate
from herald.api.problems import Problem
from herald.catalog.pipeline import close_embedded_store, register_catalog
from herald.catalog.publishing import CatalogSettings
from herald.catalog.sources import SAMPLE_COLUMNS
from herald.client import open_connection

PUBLIC = "https://data.example.org"
DATASET = f"{PUBLIC}/v1/datasets/measures#dataset"
DCAT = "http://www.w3.org/ns/dcat#"
PROBLEM = "application/problem+json"
RECORDS = 300_000


def registration(count: int = RECORDS, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "measures",
        "title": "Measures",
        "description": "Daily measures from the network of stations.",
        "publisher": {"name": "Example Statistics Office", "uri": "https://example.org/office"},
        "license": "https://creativecommons.org/licenses/by/4.0/",
        "keywords": ["measures", "stations"],
        "themes": [
            {
                "uri": "http://publications.europa.eu/resource/authority/data-theme/ENVI",
                "label": "Environment",
            }
        ],
        "contact_point": {"name": "Open data desk", "email": "opendata@example.org"},
        "languages": ["ENG"],
        "source": {"type": "generated", "count": count},
        "tier": "basic",
    }
    body.update(changes)
    return body


@dataclass
class Api:
    http: httpx.AsyncClient
    app: Herald
    settings: Settings
    tokens: dict[str, str]  # scope -> a key with only that scope
    working: asyncio.Task[None] | None = None
    worker: Worker | None = None

    def start_worker(self) -> None:
        self.worker = Worker(self.app, settings=self.settings, concurrency=2)
        self.working = asyncio.create_task(self.worker.run())

    def auth(self, scope: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}

    async def wait_for_state(self, url: str, wanted: str, limit: float = 60.0) -> dict[str, Any]:
        """Poll a version's status URL; ``limit`` only guards against a hang."""
        deadline = time.monotonic() + limit
        while True:
            body: dict[str, Any] = (await self.http.get(url, headers=self.auth("read"))).json()
            if body.get("state") == wanted:
                return body
            assert body.get("state") != "failed", body
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} never became {wanted}: {body}")
            await asyncio.sleep(0.1)

    async def download(self, url: str, target: Path, **headers: str) -> httpx.Response:
        """Stream ``url`` into ``target`` chunk by chunk; the response (body consumed)."""
        sha = hashlib.sha256()
        async with self.http.stream("GET", url, headers={**self.auth("read"), **headers}) as r:
            with target.open("wb") as out:
                async for chunk in r.aiter_raw():
                    sha.update(chunk)
                    out.write(chunk)
        r.extensions["sha256"] = sha.hexdigest()
        return r


@pytest.fixture
async def api(settings: Settings, tmp_path: Path) -> AsyncIterator[Api]:
    """The API served by uvicorn on a loopback port; a worker runs in this process once
    the test starts it."""
    local = settings.with_(data_dir=tmp_path / "data")
    app = Herald()
    register_catalog(app, local, CatalogSettings(public_url=PUBLIC))
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(app, local, ApiSettings()),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="on",
        )
    )
    serving = asyncio.create_task(server.serve())
    api: Api | None = None
    try:
        while not server.started:
            assert not serving.done(), "the server stopped during start-up"
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        async with await open_connection(local) as conn:
            tokens = {
                scope: (await create_key(conn, scope, [scope])).token
                for scope in ("submit", "read", "operate")
            }
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            api = Api(http, app, local, tokens)
            yield api
    finally:
        if api is not None and api.worker is not None and api.working is not None:
            api.worker.stop()
            await asyncio.wait_for(api.working, 30)
        server.should_exit = True
        await asyncio.wait_for(serving, 30)
        close_embedded_store(local)


def triples(body: bytes, media_type: str) -> set[tuple[str, str, str]]:
    """Parse RDF (Oxigraph's parsers: rdflib's JSON-LD parser warns on import)."""
    syntax = pyoxigraph.RdfFormat.from_media_type(media_type)
    assert syntax is not None
    return {
        (t.subject.value, t.predicate.value, t.object.value) for t in pyoxigraph.parse(body, syntax)
    }


def json_records(path: Path) -> int:
    """Parse a JSON array of records strictly, one value at a time; how many records."""
    text = path.read_text("utf-8")
    decoder = json.JSONDecoder()

    def skip(at: int) -> int:
        while at < len(text) and text[at].isspace():
            at += 1
        return at

    at = skip(0)
    assert text[at] == "["
    at = skip(at + 1)
    count = 0
    while text[at] != "]":
        record, at = decoder.raw_decode(text, at)
        assert isinstance(record, dict) and tuple(record) == SAMPLE_COLUMNS
        count += 1
        at = skip(at)
        if text[at] == ",":
            at = skip(at + 1)
    assert text[at + 1 :].strip() == ""
    return count


def xml_records(path: Path) -> int:
    count = 0
    for _event, element in ET.iterparse(path, events=("end",)):
        if element.tag == "record":
            assert element.get("id") is not None
            count += 1
            element.clear()
    return count


def csv_records(path: Path) -> int:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = csv.reader(handle)
        assert tuple(next(rows)) == SAMPLE_COLUMNS
        return sum(1 for row in rows if len(row) == len(SAMPLE_COLUMNS))


PARSERS = {"json": json_records, "xml": xml_records, "csv": csv_records}


async def test_publish_download_republish_catalog_and_sparql(api: Api, tmp_path: Path) -> None:
    r = await api.http.post("/v1/datasets", json=registration(), headers=api.auth("submit"))
    assert r.status_code == 201, r.text
    assert r.headers["location"] == "/v1/datasets/measures"
    listed = (await api.http.get("/v1/datasets", headers=api.auth("read"))).json()
    assert [d["id"] for d in listed] == ["measures"]

    first = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    again = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    assert first.status_code == again.status_code == 202, first.text
    v1 = first.json()
    assert v1["outcome"] == "created" and v1["version"] == 1
    assert first.headers["location"] == v1["status_url"] == "/v1/datasets/measures/versions/1"
    assert again.json() == {**v1, "outcome": "in_progress"}
    assert again.headers["location"] == v1["status_url"]

    api.start_worker()
    status = await api.wait_for_state(v1["status_url"], "published")
    assert status["record_count"] == RECORDS and status["validation"]["conforms"] is True
    assert status["step"] == "persist_data" and status["metadata_url"] == v1["status_url"]
    assert sorted(f["format"] for f in status["files"]) == ["csv", "json", "xml"]

    kept: dict[str, tuple[str, bytes]] = {}
    for file in status["files"]:
        target = tmp_path / file["name"]
        got = await api.download(file["download_url"], target)
        assert got.status_code == 200
        assert int(got.headers["content-length"]) == file["byte_size"] == target.stat().st_size
        assert got.extensions["sha256"] == file["sha256"]
        assert got.headers["etag"] == f'"{file["sha256"]}"'
        assert got.headers["content-type"].split(";")[0] == file["media_type"]
        assert PARSERS[file["format"]](target) == file["record_count"] == RECORDS
        kept[file["download_url"]] = (got.headers["etag"], target.read_bytes()[:4096])

    # Ranges and validators, on the CSV file.
    csv_file = next(f for f in status["files"] if f["format"] == "csv")
    url, size = csv_file["download_url"], csv_file["byte_size"]
    whole = (tmp_path / csv_file["name"]).read_bytes()
    part = await api.http.get(url, headers={**api.auth("read"), "Range": "bytes=100-1099"})
    assert part.status_code == 206 and part.content == whole[100:1100]
    assert part.headers["content-range"] == f"bytes 100-1099/{size}"
    tail = await api.http.get(url, headers={**api.auth("read"), "Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == whole[-10:]
    past = await api.http.get(url, headers={**api.auth("read"), "Range": f"bytes={size}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{size}"
    assert past.headers["content-type"].startswith(PROBLEM)
    etag = f'"{csv_file["sha256"]}"'
    cached = await api.http.get(url, headers={**api.auth("read"), "If-None-Match": etag})
    assert cached.status_code == 304 and cached.content == b""
    # HEAD: the headers a GET would send (size, validator, ranges), and no body.
    bare = await api.http.head(url, headers=api.auth("read"))
    assert bare.status_code == 200 and bare.content == b""
    assert bare.headers["content-length"] == str(size) and bare.headers["etag"] == etag
    assert bare.headers["accept-ranges"] == "bytes"
    head_part = await api.http.head(url, headers={**api.auth("read"), "Range": "bytes=100-1099"})
    assert head_part.status_code == 206 and head_part.content == b""
    assert head_part.headers["content-range"] == f"bytes 100-1099/{size}"
    assert head_part.headers["content-length"] == "1000"
    nowhere = url.replace(csv_file["name"], "nope.csv")
    missing = await api.http.head(nowhere, headers=api.auth("read"))
    assert missing.status_code == 404

    # The version's DCAT-AP, by content negotiation.
    metadata = {}
    for media in ("text/turtle", "application/ld+json", "application/rdf+xml"):
        r = await api.http.get(v1["status_url"], headers={**api.auth("read"), "Accept": media})
        assert r.status_code == 200 and r.headers["content-type"].startswith(media)
        metadata[media] = triples(r.content, media)
    entry = metadata["text/turtle"]
    assert metadata["application/ld+json"] == metadata["application/rdf+xml"] == entry
    assert (DATASET, DCAT + "version", "1") in entry
    sizes = {int(o) for _s, p, o in entry if p == DCAT + "byteSize"}
    assert sizes == {f["byte_size"] for f in status["files"]}

    # Republish from a smaller source: version 2; version 1 stays downloadable, unchanged.
    updated = await api.http.post(
        "/v1/datasets", json=registration(count=2_000), headers=api.auth("submit")
    )
    assert updated.status_code == 200 and updated.json()["source"]["count"] == 2_000
    second = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    v2 = second.json()
    assert second.status_code == 202 and v2["version"] == 2 and v2["outcome"] == "created"
    await api.wait_for_state(v2["status_url"], "published")
    for url, (etag, head) in kept.items():
        still = await api.http.get(url, headers={**api.auth("read"), "Range": "bytes=0-4095"})
        assert still.status_code == 206 and still.headers["etag"] == etag
        assert still.content == head
    versions = await api.http.get("/v1/datasets/measures/versions", headers=api.auth("read"))
    assert [(v["version"], v["state"]) for v in versions.json()] == [
        (2, "published"),
        (1, "published"),
    ]

    # The catalog in three syntaxes; anything else is a 406 problem.
    for media in ("text/turtle", "application/ld+json", "application/rdf+xml"):
        r = await api.http.get("/v1/catalog", headers={**api.auth("read"), "Accept": media})
        assert r.status_code == 200 and r.headers["content-type"].startswith(media)
        catalog = triples(r.content, media)
        assert (DATASET, DCAT + "version", "2") in catalog
        assert (f"{PUBLIC}/v1/catalog#catalog", DCAT + "dataset", DATASET) in catalog
    refused = await api.http.get(
        "/v1/catalog", headers={**api.auth("read"), "Accept": "application/pdf"}
    )
    assert refused.status_code == 406 and refused.headers["content-type"].startswith(PROBLEM)

    # SPARQL: reads answer, updates are refused and change nothing.
    select = f"SELECT ?d ?v WHERE {{ GRAPH ?g {{ ?d <{DCAT}version> ?v }} }}"
    by_get = await api.http.get("/v1/sparql", params={"query": select}, headers=api.auth("read"))
    by_post = await api.http.post("/v1/sparql", data={"query": select}, headers=api.auth("read"))
    for r in (by_get, by_post):
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/sparql-results+json")
        bindings = r.json()["results"]["bindings"]
        assert [(b["d"]["type"], b["d"]["value"], b["v"]["value"]) for b in bindings] == [
            ("uri", DATASET, "2")
        ]
    ask = await api.http.post(
        "/v1/sparql",
        content=f"ASK {{ GRAPH ?g {{ <{DATASET}> a <{DCAT}Dataset> }} }}",
        headers={**api.auth("read"), "Content-Type": "application/sparql-query"},
    )
    assert ask.json()["boolean"] is True
    drop = f"DELETE WHERE {{ GRAPH ?g {{ <{DATASET}> ?p ?o }} }}"
    for attempt in (
        api.http.get("/v1/sparql", params={"query": drop}, headers=api.auth("read")),
        api.http.get("/v1/sparql", params={"update": drop}, headers=api.auth("read")),
        api.http.post("/v1/sparql", data={"update": drop}, headers=api.auth("read")),
        api.http.post(
            "/v1/sparql",
            content=drop,
            headers={**api.auth("read"), "Content-Type": "application/sparql-update"},
        ),
    ):
        r = await attempt
        assert r.status_code == 400 and r.json()["type"].endswith("/update-refused"), r.text
    after = await api.http.get("/v1/sparql", params={"query": select}, headers=api.auth("read"))
    assert after.json()["results"]["bindings"] == by_get.json()["results"]["bindings"]

    # Deleting version 1 is an operator's job; its files go, version 2 stays.
    forbidden = await api.http.delete(v1["status_url"], headers=api.auth("submit"))
    assert forbidden.status_code == 403
    deletion = await api.http.delete(v1["status_url"], headers=api.auth("operate"))
    assert deletion.status_code == 202 and deletion.headers["location"] == v1["status_url"]
    await api.wait_for_state(v1["status_url"], "deleted")
    gone = await api.http.get(next(iter(kept)), headers=api.auth("read"))
    assert gone.status_code == 404 and gone.headers["content-type"].startswith(PROBLEM)
    assert (await api.http.get(v2["status_url"], headers=api.auth("read"))).json()["state"] == (
        "published"
    )


BAD_REGISTRATIONS: list[tuple[dict[str, Any], str]] = [
    (registration(id="../etc"), "validation"),
    # Each source type has a strict schema: refused by validation, before any handler.
    (registration(source={"type": "shell", "command": "rm"}), "validation"),
    (registration(source={"type": "generated", "count": -1}), "validation"),
    (registration(source={"type": "generated", "count": 5, "extra": 1}), "validation"),
    (registration(publisher={"name": "Office", "uri": "not a uri"}), "validation"),
    (registration(publisher={"name": "Office", "uri": "relative:"}), "validation"),
    (registration(languages=["english"]), "validation"),
    (registration(tier="gold"), "validation"),
    (registration(title="nul\u0000"), "validation"),
    (
        registration(recurrence={"frequency": "daily", "timezone": "Mars/Olympus"}),
        "invalid-schedule",
    ),
    (registration(recurrence={"frequency": "cron", "cron": "99 * * * *"}), "invalid-schedule"),
    (registration(unexpected=True), "validation"),
]


async def test_bad_input_is_refused_and_writes_nothing(api: Api) -> None:
    for body, slug in BAD_REGISTRATIONS:
        r = await api.http.post("/v1/datasets", json=body, headers=api.auth("submit"))
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"].startswith(PROBLEM)
        assert r.json()["type"].endswith(f"/{slug}"), (body, r.text)
    assert (await api.http.get("/v1/datasets", headers=api.auth("read"))).json() == []
    schedules = await api.http.get("/v1/schedules", headers=api.auth("read"))
    assert schedules.json() == []

    read = api.auth("read")
    for method, path in [
        ("GET", "/v1/datasets/nowhere"),
        ("GET", "/v1/datasets/nowhere/versions"),
        ("GET", "/v1/datasets/nowhere/versions/1"),
        ("GET", "/v1/datasets/nowhere/versions/1/files/nowhere.csv"),
    ]:
        r = await api.http.request(method, path, headers=read)
        assert r.status_code == 404 and r.headers["content-type"].startswith(PROBLEM), path
    missing = await api.http.post("/v1/datasets/nowhere/publications", headers=api.auth("submit"))
    assert missing.status_code == 404
    gone = await api.http.delete("/v1/datasets/nowhere/versions/1", headers=api.auth("operate"))
    assert gone.status_code == 404
    for path in ["/v1/datasets/nowhere/versions/0", "/v1/datasets/no%20where"]:
        assert (await api.http.get(path, headers=read)).status_code == 422
    for params in [{"query": "SELECT nonsense"}, {}]:
        r = await api.http.get("/v1/sparql", params=params, headers=read)
        assert r.status_code == 400 and r.json()["type"].endswith("/invalid-query")
    odd = await api.http.post(
        "/v1/sparql", content="x", headers={**read, "Content-Type": "text/plain"}
    )
    assert odd.status_code == 415


async def test_scopes_recurrence_and_unpublished_versions(api: Api) -> None:
    body = registration(count=10, recurrence={"frequency": "daily", "at": "03:00"})
    assert (await api.http.post("/v1/datasets", json=body)).status_code == 401
    refused = await api.http.post("/v1/datasets", json=body, headers=api.auth("read"))
    assert refused.status_code == 403
    # Whatever a source reads gets published: the server's tables and files need admin.
    for source in ({"type": "postgres_table", "table": "api_keys"}, {"type": "csv", "path": "x"}):
        sql = registration(source=source)
        denied = await api.http.post("/v1/datasets", json=sql, headers=api.auth("submit"))
        assert denied.status_code == 403 and "admin" in denied.json()["detail"]
    r = await api.http.post("/v1/datasets", json=body, headers=api.auth("submit"))
    assert r.status_code == 201, r.text
    schedule_id = r.json()["schedule_id"]
    schedule = (await api.http.get(f"/v1/schedules/{schedule_id}", headers=api.auth("read"))).json()
    assert (schedule["kind"], schedule["key"], schedule["frequency"]) == (
        "catalog.publish",
        "measures",
        "daily",
    )
    # Registering again keeps the schedule and changes its rule.
    weekly = registration(count=10, recurrence={"frequency": "weekly", "weekday": 1, "at": "04:00"})
    again = await api.http.post("/v1/datasets", json=weekly, headers=api.auth("submit"))
    assert again.status_code == 200 and again.json()["schedule_id"] == schedule_id
    changed = await api.http.get(f"/v1/schedules/{schedule_id}", headers=api.auth("read"))
    assert changed.json()["frequency"] == "weekly"
    # ... and without a recurrence removes it.
    plain = await api.http.post(
        "/v1/datasets", json=registration(count=10), headers=api.auth("submit")
    )
    assert plain.status_code == 200 and plain.json()["schedule_id"] is None
    assert (await api.http.get("/v1/schedules", headers=api.auth("read"))).json() == []
    shown = (await api.http.get("/v1/datasets/measures", headers=api.auth("read"))).json()
    assert shown["keywords"] == ["measures", "stations"] and shown["tier"] == "basic"
    assert shown["languages"] == ["http://publications.europa.eu/resource/authority/language/ENG"]

    # No worker runs: the version is requested, has no files and no DCAT-AP yet.
    publish = api.http.post("/v1/datasets/measures/publications", headers=api.auth("read"))
    assert (await publish).status_code == 403
    started = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    status = (await api.http.get(started.json()["status_url"], headers=api.auth("read"))).json()
    assert (status["state"], status["files"], status["metadata_url"]) == ("requested", [], None)
    turtle = await api.http.get(
        started.json()["status_url"], headers={**api.auth("read"), "Accept": "text/turtle"}
    )
    assert turtle.status_code == 404 and turtle.json()["type"].endswith("/no-metadata")
    busy = await api.http.delete(started.json()["status_url"], headers=api.auth("operate"))
    assert busy.status_code == 409 and busy.headers["content-type"].startswith(PROBLEM)
    empty = await api.http.get("/v1/catalog", headers={**api.auth("read"), "Accept": "*/*"})
    assert empty.status_code == 200 and empty.headers["content-type"].startswith("text/turtle")


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 10, None),
        ("bytes=0-0", 10, ByteRange(0, 0)),
        ("bytes=2-", 10, ByteRange(2, 9)),
        ("bytes=5-100", 10, ByteRange(5, 9)),
        ("bytes=-3", 10, ByteRange(7, 9)),
        ("bytes=-30", 10, ByteRange(0, 9)),
        ("bytes=5-2", 10, None),  # invalid: ignored, the whole file
        ("bytes=0-1,4-5", 10, None),  # several ranges: the whole file
        ("items=0-1", 10, None),
        ("bytes=10-", 10, Unsatisfiable),
        ("bytes=-0", 10, Unsatisfiable),
        ("bytes=0-", 0, Unsatisfiable),
    ],
)
def test_range_header(header: str | None, size: int, expected: object) -> None:
    if expected is Unsatisfiable:
        with pytest.raises(Unsatisfiable):
            parse_range(header, size)
    else:
        assert parse_range(header, size) == expected


OFFERED = ["text/turtle", "application/ld+json", "application/rdf+xml"]


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "text/turtle"),
        ("*/*", "text/turtle"),
        ("application/*", "application/ld+json"),
        ("application/rdf+xml;q=0.9, application/ld+json", "application/ld+json"),
        ("text/html, application/rdf+xml;q=0.5", "application/rdf+xml"),
        ("*/*;q=0.1, text/turtle;q=0", "application/ld+json"),
        ("text/turtle; charset=utf-8", "text/turtle"),
    ],
)
def test_content_negotiation(accept: str | None, chosen: str) -> None:
    assert negotiate(accept, OFFERED) == chosen


def test_content_negotiation_refuses_what_it_cannot_send() -> None:
    for accept in ("application/pdf", "text/turtle;q=0", "image/*"):
        with pytest.raises(Problem) as refused:
            negotiate(accept, OFFERED)
        assert refused.value.status == 406
