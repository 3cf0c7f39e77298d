"""Regression tests for the API-boundary findings: each failed on the code before the fix."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
from psycopg.types.json import Jsonb

from herald import Settings, Worker
from herald.api import ApiSettings, create_key
from herald.catalog import datasets as registry
from herald.catalog.pipeline import DELETE_VERSION, PUBLISH, close_embedded_store
from herald.client import Client, open_connection
from herald.up import is_loopback
from tests.catalog.samples import HIGH_DATASET
from tests.security.conftest import Api, open_api, problem
from tests.support import wait_for_job

FAR_FUTURE = "9000-01-01T00:00:00Z"


async def test_internal_kinds_cannot_be_submitted_or_scheduled(api: Api) -> None:
    for kind, payload in [
        (DELETE_VERSION, {"dataset_id": "measures", "version": 1}),
        (PUBLISH, {"dataset_id": "measures"}),
    ]:
        body = {"kind": kind, "payload": payload, "key": "measures", "run_at": FAR_FUTURE}
        for scope in ("submit", "admin"):
            r = await api.http.post("/v1/jobs", json=body, headers=api.auth(scope))
            problem(r, 403, "internal-kind")
        problem(await api.http.post("/v1/jobs", json=body, headers=api.auth("operate")), 403)
    schedule = {"kind": PUBLISH, "key": "measures", "frequency": "daily", "timezone": "UTC"}
    refused = await api.http.post("/v1/schedules", json=schedule, headers=api.auth("operate"))
    problem(refused, 403, "internal-kind")
    async with await open_connection(api.settings) as conn:
        cur = await conn.execute("SELECT count(*) AS n FROM jobs")
        assert await cur.fetchone() == {"n": 0}
    # A kind declares the scope it needs on top of submit; plain kinds need submit only.
    plain = await api.http.post("/v1/jobs", json={"kind": "plain"}, headers=api.auth("submit"))
    assert plain.status_code == 202
    needs_operate = {"kind": "operator_only"}
    r = await api.http.post("/v1/jobs", json=needs_operate, headers=api.auth("submit"))
    problem(r, 403, "forbidden")
    async with await open_connection(api.settings) as conn:
        both = (await create_key(conn, "both", ["submit", "operate"])).token
    r = await api.http.post(
        "/v1/jobs", json=needs_operate, headers={"Authorization": f"Bearer {both}"}
    )
    assert r.status_code == 202


async def _finish(api: Api, client: Client, job_id: int) -> dict[str, Any]:
    worker = Worker(api.app, settings=api.settings, concurrency=2)
    running = asyncio.create_task(worker.run())
    try:
        return await wait_for_job(client, job_id, limit=60)
    finally:
        worker.stop()
        await running


async def test_the_delete_step_checks_the_version_state_before_touching_files(api: Api) -> None:
    dataset = registry.Dataset(HIGH_DATASET, {"type": "generated", "count": 50}, tier="high")
    async with await Client.open(api.app, api.settings) as client:
        async with client.pool.connection() as conn:
            await registry.register_dataset(conn, dataset)
        r = await api.http.post(
            f"/v1/datasets/{dataset.id}/publications", headers=api.auth("submit")
        )
        published = await _finish(api, client, r.json()["id"])
        assert published["state"] == "succeeded", published
        # A raw deletion job, as a submit key could admit one before the fix.
        raw = await client.enqueue(DELETE_VERSION, {"dataset_id": dataset.id, "version": 1})
        job = await _finish(api, client, raw.id)
    assert job["state"] == "dead" and "request its deletion" in job["errors"][-1]["message"]
    status = await api.http.get(f"/v1/datasets/{dataset.id}/versions/1", headers=api.auth("read"))
    assert status.json()["state"] == "published"
    for file in status.json()["files"]:
        got = await api.http.get(file["download_url"], headers=api.auth("read"))
        assert got.status_code == 200 and len(got.content) == file["byte_size"]


async def _call(
    api: Api, method: str, path: str, headers: dict[str, str], chunks: list[bytes]
) -> tuple[int, bytes, int]:
    """Call the ASGI app directly: (status, body, how many body chunks it read)."""
    read = 0
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        if read < len(chunks):
            read += 1
            return {
                "type": "http.request",
                "body": chunks[read - 1],
                "more_body": read < len(chunks),
            }
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("h.test", 80),
    }
    await api.asgi(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, read


async def test_bodies_are_bounded_before_reading_and_keys_checked_before_parsing(
    api: Api,
) -> None:
    huge = {"content-length": str(64 * 1024 * 1024), "content-type": "application/json"}
    for headers in (huge, {**huge, **api.auth("submit")}):
        status, body, read = await _call(api, "POST", "/v1/jobs", headers, [b"{"])
        assert (status, read) == (413, 0), body
    # No key: refused before a byte of the body is read, whatever it holds.
    small = {"content-length": "1000", "content-type": "application/json"}
    status, _body, read = await _call(api, "POST", "/v1/jobs", small, [b"x" * 1000])
    assert (status, read) == (401, 0)
    # A body without a length is counted as it arrives and refused past the limit.
    chunk = b" " * 1_000_000
    chunked = {"content-type": "application/json", **api.auth("submit")}
    status, _body, read = await _call(api, "POST", "/v1/jobs", chunked, [chunk] * 10)
    assert status == 413 and read == 3


async def test_sources_have_strict_bounded_schemas(api: Api) -> None:
    base = {
        "id": "measures",
        "title": "Measures",
        "description": "Daily measures.",
        "publisher": {"name": "Office", "uri": "https://example.org/office"},
    }
    for source in (
        {"type": "generated", "count": 10**15},
        {"type": "generated", "count": 10, "padding": "x" * 1000},
        {"type": "generated", "count": True},
        {"type": "csv", "path": "x" * 5000},
        {"type": "postgres_query", "query": "SELECT 1", "params": {"n": {"deep": [1]}}},
    ):
        r = await api.http.post(
            "/v1/datasets", json={**base, "source": source}, headers=api.auth("admin")
        )
        problem(r, 422)
    big = {**base, "source": {"type": "generated", "count": 1, "note": "x" * 3_000_000}}
    problem(await api.http.post("/v1/datasets", json=big, headers=api.auth("admin")), 413)
    assert (await api.http.get("/v1/datasets", headers=api.auth("read"))).json() == []


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


async def test_payload_depth_is_bounded_and_stored_values_never_break_reads(api: Api) -> None:
    deep = {"kind": "plain", "payload": _nested(900)}
    r = await api.http.post("/v1/jobs", json=deep, headers=api.auth("submit"))
    problem(r, 422, "invalid-job")
    # A value stored deeper than the API can encode (as before the bound) still reads.
    ok = await api.http.post("/v1/jobs", json={"kind": "plain"}, headers=api.auth("submit"))
    job_id = ok.json()["id"]
    async with await open_connection(api.settings) as conn:
        await conn.execute(
            "UPDATE jobs SET payload = %s WHERE id = %s", (Jsonb(_nested(900)), job_id)
        )
    shown = await api.http.get(f"/v1/jobs/{job_id}", headers=api.auth("read"))
    assert shown.status_code == 200 and "_omitted" in shown.json()["payload"]


async def test_job_errors_show_type_and_message_never_tracebacks_or_paths(api: Api) -> None:
    ok = await api.http.post("/v1/jobs", json={"kind": "plain"}, headers=api.auth("submit"))
    job_id = ok.json()["id"]
    error = {
        "kind": "exception",
        "type": "FileNotFoundError",
        "message": "[Errno 2] No such file or directory: '/srv/herald/secret/x.csv'",
        "traceback": 'Traceback (most recent call last):\n  File "/srv/herald/app.py", line 3',
    }
    async with await open_connection(api.settings) as conn:
        await conn.execute("UPDATE jobs SET errors = %s WHERE id = %s", (Jsonb([error]), job_id))
    for url in (f"/v1/jobs/{job_id}", "/v1/jobs"):
        text = (await api.http.get(url, headers=api.auth("read"))).text
        assert "Traceback" not in text and "/srv/herald" not in text, text
    shown = (await api.http.get(f"/v1/jobs/{job_id}", headers=api.auth("read"))).json()
    assert shown["errors"] == [
        {
            "at": None,
            "attempt": None,
            "kind": "exception",
            "type": "FileNotFoundError",
            "message": "[Errno 2] No such file or directory: '…/x.csv'",
        }
    ]


async def test_auth_off_never_grants_admin_and_says_so(settings: Settings, tmp_path: Path) -> None:
    opened = await open_api(settings, tmp_path, ApiSettings(auth=False))
    async with opened.asgi.router.lifespan_context(opened.asgi), opened.http as http:
        for path in ("/healthz", "/v1/datasets", "/v1/nowhere"):
            assert (await http.get(path)).headers["herald-auth"] == "off"
        source = {"type": "postgres_query", "query": "SELECT * FROM api_keys"}
        body = {
            "id": "keys",
            "title": "Keys",
            "description": "",
            "publisher": {"name": "Office", "uri": "https://example.org/office"},
            "source": source,
        }
        problem(await http.post("/v1/datasets", json=body), 403, "forbidden")
        assert (await http.post("/v1/jobs", json={"kind": "plain"})).status_code == 202
    close_embedded_store(opened.settings)
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.9"):
        assert is_loopback(host)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.org"):
        assert not is_loopback(host)
    assert ApiSettings.from_env({"HERALD_API_AUTH": "off"}).auth_forced is False


async def test_metrics_can_require_a_key_or_move_to_their_own_port(
    settings: Settings, tmp_path: Path
) -> None:
    keyed = await open_api(settings, tmp_path / "a", ApiSettings(metrics="key"))
    async with keyed.asgi.router.lifespan_context(keyed.asgi), keyed.http as http:
        problem(await http.get("/metrics"), 401)
        assert (await http.get("/metrics", headers=keyed.auth("read"))).status_code == 200
        problem(await http.get("/metrics", headers=keyed.auth("submit")), 403)
    close_embedded_store(keyed.settings)
    env = {"HERALD_METRICS_PORT": "9464"}
    moved = ApiSettings.from_env(env)
    assert (moved.metrics, moved.metrics_port) == ("off", 9464)
    off = await open_api(settings, tmp_path / "b", moved)
    async with off.asgi.router.lifespan_context(off.asgi), off.http as http:
        problem(await http.get("/metrics"), 404)
    close_embedded_store(off.settings)


def test_problem_bodies_are_json() -> None:
    # The boundary writes its answers itself: they must still be problem documents.
    response = httpx.Response(413, content=json.dumps({"type": "x"}).encode())
    assert response.json() == {"type": "x"}
