"""The catalog over HTTP, end to end: a real server on a loopback port, a real worker in
this process, real PostgreSQL, the embedded triple store and the local export store."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import hashlib
import json
import logging
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyoxigraph
import pytest
import uvicorn
from fastapi import FastAPI
from rdflib import Graph, Literal, URIRef

from herald import Herald, Settings, Worker
from herald.api import ApiSettings, create_app, create_key
from herald.api.catalog_downloads import ByteRange, Unsatisfiable, parse_range
from herald.api.catalog_rdf import negotiate
from herald.api.problems import Problem
from herald.catalog import undo
from herald.catalog.admission import save_dataset
from herald.catalog.datasets import get_version
from herald.catalog.pipeline import catalog_runtime, close_embedded_store, register_catalog
from herald.catalog.publishing import CatalogSettings
from herald.catalog.sources import SAMPLE_COLUMNS
from herald.catalog.specs import parse_dataset
from herald.client import Client, open_connection
from tests.catalog.official import official_reports
from tests.catalog.servers import free_port, oxigraph_server, virtuoso_server
from tests.eventually import eventually

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

        async def reached() -> dict[str, Any] | None:
            body: dict[str, Any] = (await self.http.get(url, headers=self.auth("read"))).json()
            assert body.get("state") != "failed", body
            return body if body.get("state") == wanted else None

        return await eventually(
            reached, what=f"{url} to become {wanted}", within=limit, interval=0.1
        )

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


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    catalog: CatalogSettings | None = None,
    more: Callable[[FastAPI], None] | None = None,
) -> AsyncIterator[Api]:
    """The API served by uvicorn on a loopback port; a worker runs in this process once
    the test starts it. ``more`` may add routes to the application first."""
    app = Herald()
    register_catalog(app, settings, catalog or CatalogSettings(public_url=PUBLIC))
    api_app = create_app(app, settings, ApiSettings())
    if more is not None:
        more(api_app)
    server = uvicorn.Server(
        uvicorn.Config(
            api_app,
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
        async with await open_connection(settings) as conn:
            tokens = {
                scope: (await create_key(conn, scope, [scope])).token
                for scope in ("submit", "read", "operate", "admin")
            }
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            api = Api(http, app, settings, tokens)
            yield api
    finally:
        if api is not None and api.worker is not None and api.working is not None:
            api.worker.stop()
            await asyncio.wait_for(api.working, 30)
        server.should_exit = True
        await asyncio.wait_for(serving, 30)
        close_embedded_store(settings)


@pytest.fixture
async def api(settings: Settings, tmp_path: Path) -> AsyncIterator[Api]:
    async with serving(settings.with_(data_dir=tmp_path / "data")) as api:
        yield api


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
    listed_files = versions.json()[1]["files"]  # the list shows each version's files
    assert sorted(f["download_url"] for f in listed_files) == sorted(kept)
    assert versions.json()[0]["columns"] == [{"name": c} for c in SAMPLE_COLUMNS]

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
    # (the catalog's datasets: their versions have a dcat:version of their own)
    select = (
        f"SELECT ?d ?v WHERE {{ GRAPH ?g {{ ?c <{DCAT}dataset> ?d . ?d <{DCAT}version> ?v }} }}"
    )
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
    why = {"reason": "superseded by version 2"}
    forbidden = await api.http.request(
        "DELETE", v1["status_url"], json=why, headers=api.auth("submit")
    )
    assert forbidden.status_code == 403
    unexplained = await api.http.delete(v1["status_url"], headers=api.auth("operate"))
    assert unexplained.status_code == 422  # a removal says why
    deletion = await api.http.request(
        "DELETE", v1["status_url"], json=why, headers=api.auth("operate")
    )
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
    gone = await api.http.request(
        "DELETE",
        "/v1/datasets/nowhere/versions/1",
        json={"reason": "cleanup"},
        headers=api.auth("operate"),
    )
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
    busy = await api.http.request(
        "DELETE", started.json()["status_url"], json={"reason": "x"}, headers=api.auth("operate")
    )
    assert busy.status_code == 409 and busy.headers["content-type"].startswith(PROBLEM)
    empty = await api.http.get("/v1/catalog", headers={**api.auth("read"), "Accept": "*/*"})
    assert empty.status_code == 200 and empty.headers["content-type"].startswith("text/turtle")


FULL = registration(
    count=10,
    tier="high",
    publisher={
        "name": "Example Statistics Office",
        "uri": "https://example.org/office",
        "type": {
            "uri": "http://purl.org/adms/publishertype/NationalAuthority",
            "label": "National authority",
        },
    },
    license={
        "uri": "https://creativecommons.org/licenses/by/4.0/",
        "type": {"uri": "http://purl.org/adms/licencetype/Attribution", "label": "Attribution"},
    },
    spatial={
        "uri": "http://publications.europa.eu/resource/authority/country/BEL",
        "bbox": "POLYGON((2.5 49.5, 6.4 49.5, 6.4 51.5, 2.5 51.5, 2.5 49.5))",
        "centroid": "POINT(4.5 50.5)",
    },
    temporal={"start": "2024-01-01", "end": "2024-12-31"},
    landing_page="https://example.org/measures",
)
SERVER_FIELDS = ("schedule_id", "next_version", "versions_url", "removed")


async def test_registration_carries_every_field_and_nothing_is_dropped_silently(
    api: Api, tmp_path: Path
) -> None:
    # Registered as the CLI does (the same document, read from a file) ...
    spec_file = tmp_path / "measures.json"
    spec_file.write_text(json.dumps(FULL), "utf-8")
    dataset, recurrence = parse_dataset(json.loads(spec_file.read_text("utf-8")), tmp_path)
    async with await Client.open(api.app, api.settings) as client:
        await save_dataset(client, dataset, recurrence)
    shown = (await api.http.get("/v1/datasets/measures", headers=api.auth("read"))).json()
    assert shown["spatial"] == FULL["spatial"] and shown["temporal"] == FULL["temporal"]
    assert shown["landing_page"] == FULL["landing_page"]
    assert shown["publisher"]["type"] == FULL["publisher"]["type"]
    assert shown["license"] == FULL["license"]

    # ... and again through the API, with what the API answered: nothing changes.
    again = {k: v for k, v in shown.items() if k not in SERVER_FIELDS}
    again["reason"] = "same description"
    r = await api.http.post("/v1/datasets", json=again, headers=api.auth("submit"))
    assert r.status_code == 200, r.text
    assert r.json()["removed"] == []
    assert {k: v for k, v in r.json().items() if k not in SERVER_FIELDS} == {
        k: v for k, v in shown.items() if k not in SERVER_FIELDS
    }
    # A description that leaves fields out replaces the old one, and says what went.
    shorter = {k: v for k, v in again.items() if k not in ("spatial", "temporal")}
    r = await api.http.post("/v1/datasets", json=shorter, headers=api.auth("submit"))
    assert r.status_code == 200 and r.json()["removed"] == ["spatial", "temporal"]

    # The full description publishes at the high tier, every field in its DCAT-AP.
    api.start_worker()
    full = await api.http.post("/v1/datasets", json=FULL, headers=api.auth("submit"))
    assert full.status_code == 200 and full.json()["removed"] == []
    started = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    status = await api.wait_for_state(started.json()["status_url"], "published")
    assert status["validation"]["conforms"] is True and status["validation"]["tier"] == "high"
    turtle = await api.http.get(
        status["status_url"], headers={**api.auth("read"), "Accept": "text/turtle"}
    )
    entry = triples(turtle.content, "text/turtle")
    dct = "http://purl.org/dc/terms/"
    assert (DATASET, dct + "spatial", FULL["spatial"]["uri"]) in entry
    assert (DATASET, DCAT + "landingPage", FULL["landing_page"]) in entry
    assert (FULL["license"]["uri"], dct + "type", FULL["license"]["type"]["uri"]) in entry

    audit = await api.http.get(
        "/v1/audit", params={"target_type": "dataset"}, headers=api.auth("read")
    )
    assert [(e["action"], e["actor"], e["reason"]) for e in audit.json()] == [
        ("publish", "submit", "(no reason given)"),
        ("update", "submit", "(no reason given)"),
        ("update", "submit", "same description"),  # the shorter one
        ("update", "submit", "same description"),
    ]
    assert audit.json()[1]["before"]["spatial"] is None
    assert audit.json()[1]["after"]["spatial"] == FULL["spatial"]


async def test_publications_honour_idempotency_keys_and_are_audited(api: Api) -> None:
    r = await api.http.post("/v1/datasets", json=registration(count=10), headers=api.auth("submit"))
    assert r.status_code == 201
    url = "/v1/datasets/measures/publications"
    headers = {**api.auth("submit"), "Idempotency-Key": "nightly-2025-06-01"}
    first = await api.http.post(url, json={"reason": "nightly"}, headers=headers)
    again = await api.http.post(url, json={"reason": "nightly"}, headers=headers)
    assert first.status_code == again.status_code == 202, first.text
    assert first.json()["outcome"] == "created" and again.json()["outcome"] == "replay"
    assert again.json()["id"] == first.json()["id"] and again.json()["version"] == 1

    api.start_worker()
    await api.wait_for_state(first.json()["status_url"], "published")
    # Retried after it finished: still the same publication, not a second version.
    late = await api.http.post(url, json={"reason": "nightly"}, headers=headers)
    assert late.status_code == 202 and late.json()["outcome"] == "replay"
    assert late.json()["version"] == 1
    other = await api.http.post(
        url, headers={**api.auth("submit"), "Idempotency-Key": "nightly-2025-06-02"}
    )
    assert other.json()["outcome"] == "created" and other.json()["version"] == 2
    versions = await api.http.get("/v1/datasets/measures/versions", headers=api.auth("read"))
    assert [v["version"] for v in versions.json()] == [2, 1]
    log = await api.http.get("/v1/audit", params={"action": "publish"}, headers=api.auth("read"))
    assert [(e["reason"], e["after"]["version"]) for e in log.json()] == [
        ("(no reason given)", 2),
        ("nightly", 1),
    ]


async def test_a_cancelled_publication_shows_failed_at_once_and_is_undone(api: Api) -> None:
    r = await api.http.post("/v1/datasets", json=registration(count=10), headers=api.auth("submit"))
    assert r.status_code == 201
    started = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    body = started.json()
    cancel = await api.http.post(
        f"/v1/jobs/{body['id']}/cancel", json={"reason": "wrong data"}, headers=api.auth("operate")
    )
    assert cancel.status_code == 200, cancel.text
    # The version follows its job at once, before any cleanup has run.
    status = (await api.http.get(body["status_url"], headers=api.auth("read"))).json()
    assert status["state"] == "failed" and status["job_state"] == "cancelled"
    assert "cancelled by operate: wrong data" in status["error"]
    # The catalog's reconcile duty settles the row itself (files, entry, state).
    assert await undo.reconcile(catalog_runtime(api.app), grace=0) == 1
    async with await open_connection(api.settings) as conn:
        record = await get_version(conn, "measures", 1)
    assert record is not None and record.state == "failed" and not record.abandoned
    assert record.error == "publication cancelled: cancelled by operate: wrong data"
    assert await undo.reconcile(catalog_runtime(api.app), grace=0) == 0


@pytest.mark.slow
@pytest.mark.parametrize("server", ["oxigraph", "virtuoso"])
async def test_the_catalog_through_real_sparql_servers(
    server: str, settings: Settings, tmp_path: Path
) -> None:
    """Published, served and validated through Oxigraph's server and Virtuoso: what a
    reader gets from ``/v1/catalog`` conforms to the official shapes."""
    start = oxigraph_server if server == "oxigraph" else virtuoso_server
    with start(tmp_path) as endpoint:
        catalog = CatalogSettings(
            public_url=PUBLIC,
            sparql_query_url=endpoint.query_url,
            sparql_update_url=endpoint.update_url,
        )
        async with serving(settings.with_(data_dir=tmp_path / "data"), catalog) as api:
            await _publish_and_read(api, server)


async def _publish_and_read(api: Api, server: str) -> None:
    r = await api.http.post(
        "/v1/datasets", json={**FULL, "id": "measures"}, headers=api.auth("submit")
    )
    assert r.status_code in (200, 201), r.text
    api.start_worker()
    started = await api.http.post("/v1/datasets/measures/publications", headers=api.auth("submit"))
    await api.wait_for_state(started.json()["status_url"], "published")
    served = await api.http.get(
        "/v1/catalog", headers={**api.auth("read"), "Accept": "text/turtle"}
    )
    assert served.status_code == 200, (server, served.text)
    graph = Graph().parse(data=served.content, format="turtle")
    assert (URIRef(DATASET), URIRef(DCAT + "version"), Literal("1")) in graph
    for shapes, report in official_reports(graph).items():
        assert report.conforms, (server, shapes, report.text())
    sparql = await api.http.get(
        "/v1/sparql",
        params={"query": f"ASK {{ GRAPH ?g {{ <{DATASET}> a <{DCAT}Dataset> }} }}"},
        headers=api.auth("read"),
    )
    assert sparql.status_code == 200 and sparql.json()["boolean"] is True, (server, sparql.text)


async def test_an_unexpected_error_is_one_500_and_one_traceback(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Through a real server: the error is answered by a problem document and logged once
    with its traceback (not a second time by the server). A failing backing service is
    not such an error: it is a 503, logged without a traceback."""

    def broken(app: FastAPI) -> None:
        async def boom() -> None:
            raise RuntimeError("a bug")

        app.add_api_route("/v1/boom", boom, methods=["GET"])

    closed = f"http://127.0.0.1:{free_port()}/sparql"  # nothing listens there
    catalog = CatalogSettings(public_url=PUBLIC, sparql_query_url=closed, sparql_update_url=closed)
    async with serving(settings.with_(data_dir=tmp_path / "data"), catalog, broken) as api:
        caplog.clear()
        with caplog.at_level(logging.INFO):
            bug = await api.http.get("/v1/boom", headers=api.auth("read"))
            down = await api.http.get("/v1/catalog", headers=api.auth("read"))
    assert bug.status_code == 500 and bug.headers["content-type"].startswith(PROBLEM)
    assert bug.json()["detail"] == "internal error; see the server log"
    assert down.status_code == 503 and down.headers["content-type"].startswith(PROBLEM)
    tracebacks = [rec for rec in caplog.records if rec.exc_info is not None]
    assert len(tracebacks) == 1, [rec.getMessage() for rec in tracebacks]
    assert tracebacks[0].getMessage() == "unhandled error on GET /v1/boom"


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
