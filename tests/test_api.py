"""HTTP API against a real database: admission, inspection, errors, keys and quotas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from herald.api import ApiSettings, create_app, create_key, revoke_key
from herald.client import open_connection
from herald.config import Settings
from tests.support import APP

PROBLEM = "application/problem+json"


@dataclass
class Api:
    http: httpx.AsyncClient
    app: FastAPI
    settings: Settings
    token: str  # an admin key

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}

    async def key(self, name: str, scopes: list[str], quota: int | None = None) -> str:
        async with await open_connection(self.settings) as conn:
            return (await create_key(conn, name, scopes, quota)).token


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    app = create_app(APP, settings, ApiSettings(retry_after=7))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://herald.test"
        ) as http,
    ):
        async with await open_connection(settings) as conn:
            admin = await create_key(conn, "admin", ["admin"])
        yield Api(http, app, settings, admin.token)


def assert_problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert isinstance(body, dict)
    assert {"type", "title", "status", "detail", "instance"} <= body.keys()
    assert body["status"] == status
    return body


async def test_submit_answers_202_with_location_and_the_job_is_inspectable(api: Api) -> None:
    r = await api.http.post(
        "/v1/jobs",
        json={"kind": "echo", "payload": {"n": 1}, "key": "doc-1", "priority": 5},
        headers=api.auth(),
    )
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["outcome"] == "created" and body["version"] == 1
    assert r.headers["location"] == body["status_url"] == f"/v1/jobs/{body['id']}"

    job = (await api.http.get(body["status_url"], headers=api.auth())).json()
    assert job["state"] == "waiting" and job["kind"] == "echo" and job["key"] == "doc-1"
    assert job["attempt"] == 0 and job["max_attempts"] == 3 and job["priority"] == 5
    assert job["payload"] == {"n": 1} and job["errors"] == []
    assert job["history"]["created_at"] and job["history"]["finished_at"] is None

    # A second trigger for the same object while it is active: the active job's id.
    again = await api.http.post(
        "/v1/jobs", json={"kind": "echo", "key": "doc-1"}, headers=api.auth()
    )
    assert again.status_code == 202
    assert again.json()["id"] == body["id"] and again.json()["outcome"] == "in_progress"

    listed = await api.http.get("/v1/jobs", params={"kind": "echo"}, headers=api.auth())
    assert [j["id"] for j in listed.json()] == [body["id"]]


async def test_idempotency_key_replays_and_conflicts(api: Api) -> None:
    headers = {**api.auth(), "Idempotency-Key": "req-42"}
    first = await api.http.post(
        "/v1/jobs", json={"kind": "noop", "payload": {"a": 1}}, headers=headers
    )
    replay = await api.http.post(
        "/v1/jobs", json={"kind": "noop", "payload": {"a": 1}}, headers=headers
    )
    assert first.status_code == replay.status_code == 202
    assert replay.json()["id"] == first.json()["id"] and replay.json()["outcome"] == "replay"
    other = await api.http.post(
        "/v1/jobs", json={"kind": "noop", "payload": {"a": 2}}, headers=headers
    )
    body = assert_problem(other, 409)
    assert body["job_id"] == first.json()["id"]
    listed = await api.http.get("/v1/jobs", headers=api.auth())
    assert len(listed.json()) == 1


BAD_SUBMISSIONS: list[tuple[object, int, str]] = [
    ({"payload": {}}, 422, "validation"),
    ({"kind": "no_such_kind"}, 422, "unknown-kind"),
    ({"kind": "echo", "payload": {"blob": "x" * 2000}}, 413, "payload-too-large"),
    ({"kind": "echo", "run_at": "2030-01-01T00:00:00"}, 422, "validation"),
    ({"kind": "echo", "priority": 40000}, 422, "validation"),
    ({"kind": "echo", "key": "nul\u0000key"}, 422, "validation"),
    ({"kind": "echo", "payload": {"text": "nul\u0000"}}, 422, "invalid-job"),
    ({"kind": "echo", "unexpected": 1}, 422, "validation"),
    ([1, 2, 3], 422, "validation"),
    # Shifted to UTC this is year 10000: it could never be read back.
    ({"kind": "echo", "run_at": "9999-12-31T23:59:59-05:00"}, 422, "validation"),
    (b'{"kind": "echo", "payload": {"s": "\\ud800"}}', 422, "invalid-job"),
    (b'{"kind": "echo", "payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "bad-request"),
]


async def test_bad_submissions_are_problems_and_write_nothing(api: Api) -> None:
    api.app.state.herald.client.settings = api.settings.with_(payload_limit=1000)
    for body, status, slug in BAD_SUBMISSIONS:
        if isinstance(body, bytes):
            headers = {**api.auth(), "Content-Type": "application/json"}
            r = await api.http.post("/v1/jobs", content=body, headers=headers)
        else:
            r = await api.http.post("/v1/jobs", json=body, headers=api.auth())
        problem = assert_problem(r, status)
        assert problem["type"] == f"https://herald.dev/problems/{slug}", body
        assert problem["instance"] == "/v1/jobs"
    assert (await api.http.get("/v1/jobs", headers=api.auth())).json() == []


async def test_unknown_ids_routes_and_malformed_input(api: Api) -> None:
    assert_problem(await api.http.get("/v1/jobs/999999", headers=api.auth()), 404)
    assert_problem(await api.http.get("/v1/jobs/99999999999999999999", headers=api.auth()), 422)
    assert_problem(await api.http.get("/v1/jobs/abc", headers=api.auth()), 422)
    assert_problem(await api.http.get("/v1/nothing-here", headers=api.auth()), 404)
    assert_problem(await api.http.delete("/v1/jobs", headers=api.auth()), 405)
    bad_json = await api.http.post(
        "/v1/jobs",
        content=b'{"kind": "echo",, "payload": {}}',
        headers={**api.auth(), "Content-Type": "application/json"},
    )
    detail = assert_problem(bad_json, 400)["detail"]
    assert detail == (
        "the request body is not valid JSON: Expecting property name enclosed in double "
        "quotes (at character 16)"
    )
    for media in ("text/plain", "application/x-www-form-urlencoded"):
        wrong = await api.http.post(
            "/v1/jobs",
            content=b'{"kind": "echo"}',
            headers={**api.auth(), "Content-Type": media},
        )
        problem = assert_problem(wrong, 415)
        assert problem["detail"] == f"the request body must be application/json, not {media}"
    unlabelled = await api.http.post("/v1/jobs", content=b'{"kind": "echo"}', headers=api.auth())
    assert assert_problem(unlabelled, 415)["detail"] == (
        "the request body must be application/json, and say so in Content-Type"
    )
    # A JSON media type with parameters is JSON; an empty body is a missing body.
    fine = await api.http.post(
        "/v1/jobs",
        content=b'{"kind": "echo"}',
        headers={**api.auth(), "Content-Type": "application/json; charset=utf-8"},
    )
    assert fine.status_code == 202, fine.text
    assert_problem(await api.http.post("/v1/jobs", headers=api.auth()), 422)
    bad_filter = await api.http.get("/v1/jobs", params={"state": "sleeping"}, headers=api.auth())
    assert_problem(bad_filter, 422)


async def test_keys_are_required_scoped_and_revocable(api: Api) -> None:
    missing = assert_problem(await api.http.get("/v1/jobs"), 401)
    assert missing["type"] == "https://herald.dev/problems/unauthenticated"
    wrong = await api.http.get("/v1/jobs", headers=api.auth("hrld_not-a-key"))
    assert_problem(wrong, 401)
    assert wrong.headers["www-authenticate"] == "Bearer"

    reader = await api.key("dashboard", ["read"])
    assert (await api.http.get("/v1/jobs", headers=api.auth(reader))).status_code == 200
    refused = await api.http.post("/v1/jobs", json={"kind": "noop"}, headers=api.auth(reader))
    assert "submit" in str(assert_problem(refused, 403)["detail"])

    submitter = await api.key("ingest", ["submit"])
    ok = await api.http.post("/v1/jobs", json={"kind": "noop"}, headers=api.auth(submitter))
    assert ok.status_code == 202
    assert_problem(await api.http.get("/v1/jobs", headers=api.auth(submitter)), 403)

    async with await open_connection(api.settings) as conn:
        assert await revoke_key(conn, "ingest")
        assert not await revoke_key(conn, "ingest")
    gone = await api.http.post("/v1/jobs", json={"kind": "noop"}, headers=api.auth(submitter))
    assert_problem(gone, 401)


async def test_quota_on_active_jobs_answers_429_with_retry_after(api: Api) -> None:
    token = await api.key("batch", ["submit", "read"], quota=2)
    headers = api.auth(token)
    for key in ("a", "b"):
        r = await api.http.post("/v1/jobs", json={"kind": "noop", "key": key}, headers=headers)
        assert r.status_code == 202
    over = await api.http.post("/v1/jobs", json={"kind": "noop", "key": "c"}, headers=headers)
    assert assert_problem(over, 429)["quota"] == 2
    assert over.headers["retry-after"] == "7"
    # Nothing was written for the refused job, and a trigger of an active job is no new load.
    assert len((await api.http.get("/v1/jobs", headers=headers)).json()) == 2
    dup = await api.http.post("/v1/jobs", json={"kind": "noop", "key": "a"}, headers=headers)
    assert dup.status_code == 202 and dup.json()["outcome"] == "in_progress"
    # Another key's quota is its own.
    other = await api.http.post("/v1/jobs", json={"kind": "noop", "key": "c"}, headers=api.auth())
    assert other.status_code == 202
    # Once one of the key's jobs finishes, it may submit again.
    async with await open_connection(api.settings) as conn:
        await conn.execute(
            "UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE key = 'a'"
        )
    again = await api.http.post("/v1/jobs", json={"kind": "noop", "key": "d"}, headers=headers)
    assert again.status_code == 202


async def test_api_documentation_is_served_from_the_package(api: Api) -> None:
    page = await api.http.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "cdn." not in html and "https://" not in html.split("</title>")[1].split("<p")[0]
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "LICENSE"):
        assert f"/docs/assets/{asset}" in html
        served = await api.http.get(f"/docs/assets/{asset}")
        assert served.status_code == 200 and len(served.content) > 1000, asset
    licence = (await api.http.get("/docs/assets/LICENSE")).text
    assert "Apache License" in licence and "Version 2.0" in licence
    bundle = (await api.http.get("/docs/assets/swagger-ui-bundle.js")).text
    assert "SwaggerUIBundle" in bundle
    assert_problem(await api.http.get("/docs/assets/swagger-editor.js"), 404)  # not served
    assert_problem(await api.http.get("/docs/assets/..%2Fcore.py"), 404)
    assert (await api.http.get("/openapi.json")).status_code == 200


async def test_health_and_readiness(api: Api) -> None:
    assert (await api.http.get("/healthz")).json() == {"status": "ok"}
    assert (await api.http.get("/readyz")).json() == {"status": "ready"}
    async with await open_connection(api.settings) as conn:
        await conn.execute("DELETE FROM schema_migrations WHERE version = 5")
    body = assert_problem(await api.http.get("/readyz"), 503)
    assert "0005_api" in str(body["detail"])


async def test_auth_can_be_switched_off_explicitly(settings: Settings) -> None:
    app = create_app(APP, settings, ApiSettings(auth=False))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://herald.test") as http,
    ):
        r = await http.post("/v1/jobs", json={"kind": "noop"})
        assert r.status_code == 202
    assert ApiSettings.from_env({}).auth is True
    assert ApiSettings.from_env({"HERALD_API_AUTH": "off"}).auth is False
