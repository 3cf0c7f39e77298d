"""Two tenants, every route, every scope: nothing one tenant does reaches the other.

Tenant "globex" holds a job, a schedule, a dataset, a dead letter and audit entries, and
the applications' records (an ingestion provider with a run and a quarantined line, a
social user, account and post, a generations dataset with a quarantined item), whose
contents carry a marker. Every route the API declares (read from its OpenAPI document,
so a new route is tried too, and the test fails until the route's scope is listed) is
then called with a key of each scope of tenant "acme", its path parameters naming
globex's records: no answer may show the marker, and afterwards globex's records are as
they were. A platform key crosses only by naming the tenant, and is audited.
"""

from __future__ import annotations

import secrets
from typing import Any

import psycopg
import pytest

from herald import tenancy
from herald.api import create_key
from herald.client import open_connection
from tests.security.conftest import Api
from tests.security.test_scope_matrix import EXPECTED, SAMPLE, _routes
from tests.tenancy_kit import make_tenants

MARKER = "globex-secret-" + secrets.token_hex(4)
SCOPES = ("submit", "read", "operate", "admin")


async def _keys(api: Api, tenant: str, scopes: tuple[str, ...]) -> dict[str, dict[str, str]]:
    headers = {}
    with tenancy.acting_as(tenant):
        async with await open_connection(api.settings) as conn:
            await tenancy.tell(conn)
            for scope in scopes:
                key = await create_key(conn, f"{tenant}-{scope}", [scope])
                headers[scope] = {"Authorization": f"Bearer {key.token}"}
    return headers


def _registration(dataset_id: str) -> dict[str, Any]:
    return {
        "id": dataset_id,
        "title": f"Data {MARKER}",
        "description": f"Held by globex {MARKER}",
        "publisher": {"name": "Globex", "uri": "https://globex.example.org"},
        "license": "https://creativecommons.org/licenses/by/4.0/",
        "source": {"type": "generated", "count": 10},
        "tier": "basic",
    }


async def _seed_globex(api: Api, admin: dict[str, str]) -> dict[str, str]:
    job = await api.http.post(
        "/v1/jobs",
        json={"kind": "plain", "payload": {"secret": MARKER}, "run_at": "2999-01-01T00:00:00Z"},
        headers={**admin, "Idempotency-Key": "shared-idempotency-key"},
    )
    assert job.status_code == 202, job.text
    schedule = await api.http.post(
        "/v1/schedules",
        json={
            "kind": "plain",
            "key": "globex-nightly",
            "frequency": "daily",
            "timezone": "UTC",
            "at": "03:00",
            "payload": {"secret": MARKER},
            "reason": MARKER,
        },
        headers=admin,
    )
    assert schedule.status_code == 201, schedule.text
    dataset = await api.http.post("/v1/datasets", json=_registration("globex-data"), headers=admin)
    assert dataset.status_code in (200, 201, 202), dataset.text
    with psycopg.connect(
        api.settings.database_url or "", options=f"-c search_path={api.settings.schema}"
    ) as su:
        row = su.execute(
            "INSERT INTO dead_letters (tenant_id, job_id, kind, queue, version, payload, "
            "attempt, errors, reason) VALUES ('globex', 999999, 'plain', 'default', 1, "
            "%s::jsonb, 1, '[]', 'permanent') RETURNING id",
            (f'{{"secret": "{MARKER}"}}',),
        ).fetchone()
    assert row is not None
    return {
        "job_id": str(job.json()["id"]),
        "schedule_id": str(schedule.json()["id"]),
        "dataset_id": "globex-data",
        "dead_letter_id": str(row[0]),
        **_seed_globex_applications(api),
    }


# The applications' records of globex, written as the migrating role naming the tenant;
# each statement answers the id a route's path names it by.
_APPLICATION_ROWS = {
    "name": "INSERT INTO ingest_providers (tenant_id, name, url, format) VALUES "
    "('globex', 'globex-feed', 'https://feed.example.org/' || %(m)s, 'csv') RETURNING name",
    "run_id": "INSERT INTO ingest_runs (tenant_id, provider, state, job_id, job_fence, "
    "snapshot_at, staged_at, rows_staged) VALUES ('globex', 'globex-feed', 'staged', 1, 1, "
    "now(), now(), 1) RETURNING id",
    "ingest_quarantine": "INSERT INTO ingest_quarantine (tenant_id, run_id, provider, reason, "
    "raw, truncated, byte_offset, line, expires_at) SELECT 'globex', id, provider, %(m)s, "
    "%(m)s, false, 0, 1, now() + interval '1 day' FROM ingest_runs "
    "WHERE tenant_id = 'globex' RETURNING id",
    "user_id": "INSERT INTO social_users (tenant_id, username, email) "
    "VALUES ('globex', %(m)s, 'globex@example.org') RETURNING id",
    "account_id": "INSERT INTO social_accounts (tenant_id, owner, provider, name, external_id, "
    "base_url, credentials) VALUES ('globex', 'globex-team', 'webhook', %(m)s, %(m)s, "
    "'https://hook.example.org', %(m)s) RETURNING id",
    "post_id": "INSERT INTO social_posts (tenant_id, owner, account_id, message, "
    "idempotency_key, body_hash) SELECT 'globex', 'globex-team', id, %(m)s, 'same-key', "
    "repeat('a', 64) FROM social_accounts WHERE tenant_id = 'globex' RETURNING id",
    "dataset": "INSERT INTO gen_datasets (tenant_id, name, owner, schema_version, fields) "
    "VALUES ('globex', 'globex-gen', %(m)s, 1, '{a}') RETURNING name",
    "item_id": "INSERT INTO gen_quarantine (tenant_id, dataset, owner, reason_code, detail, "
    "expires_at) VALUES ('globex', 'globex-gen', %(m)s, 'bad_record', %(m)s, "
    "now() + interval '1 day') RETURNING id",
}
APPLICATION_TABLES = (
    "ingest_providers",
    "ingest_runs",
    "ingest_quarantine",
    "social_users",
    "social_accounts",
    "social_posts",
    "gen_datasets",
    "gen_quarantine",
)


def _seed_globex_applications(api: Api) -> dict[str, str]:
    ids = {}
    with psycopg.connect(
        api.settings.database_url or "", options=f"-c search_path={api.settings.schema}"
    ) as su:
        for name, statement in _APPLICATION_ROWS.items():
            row = su.execute(statement, {"m": MARKER}).fetchone()
            assert row is not None
            ids[name] = str(row[0])
    return ids


def _globex_state(api: Api) -> dict[str, Any]:
    """What globex owns, as the migrating role (no row-level security) sees it."""
    with psycopg.connect(
        api.settings.database_url or "", options=f"-c search_path={api.settings.schema}"
    ) as su:
        tables = (
            "jobs",
            "schedules",
            "datasets",
            "dead_letters",
            "dataset_versions",
            *APPLICATION_TABLES,
        )
        state: dict[str, Any] = {}
        for table in tables:
            rows = su.execute(
                f"SELECT to_jsonb(t) - 'updated_at' AS r FROM {table} t "
                "WHERE tenant_id = 'globex' ORDER BY 1::text"
            ).fetchall()
            state[table] = sorted(str(r[0]) for r in rows)
        actors = su.execute(
            "SELECT DISTINCT actor FROM audit_log WHERE tenant_id = 'globex'"
        ).fetchall()
        state["audit_actors"] = sorted(a[0] for a in actors)
    return state


def _url(path: str, ids: dict[str, str]) -> str:
    values = {**SAMPLE, **ids}
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


@pytest.mark.slow
async def test_no_route_and_no_scope_reaches_another_tenant(api: Api) -> None:
    assert _routes(api) == set(EXPECTED), "a route was added: list its scope in the matrix"
    await make_tenants(api.asgi.state.herald.client.pool, "acme", "globex")
    acme = await _keys(api, "acme", SCOPES)
    globex = await _keys(api, "globex", ("admin",))
    ids = await _seed_globex(api, globex["admin"])
    before = _globex_state(api)
    assert MARKER in str(before["jobs"])
    assert all(MARKER in str(before[t]) for t in APPLICATION_TABLES if t != "ingest_runs")
    for (method, path), needed in sorted(EXPECTED.items()):
        if needed is None:
            continue
        url = _url(path, ids)
        body = {"reason": "probe", "kind": "plain", "payload": {}}
        for scope in SCOPES:
            r = await api.http.request(
                method,
                url,
                json=body if method in ("POST", "PATCH", "DELETE") else None,
                headers=acme[scope],
            )
            assert MARKER not in r.text, (method, path, scope, r.status_code)
            names_globex = any("{" + n + "}" in path for n in ids)
            if names_globex and method in ("GET", "HEAD"):
                assert r.status_code in (403, 404, 422), (method, path, scope, r.status_code)
    # a provider name globex uses is acme's to use too: acme's own provider, a new row
    own = await api.http.put(
        "/v1/ingest/providers/globex-feed",
        json={"url": "https://acme.example.org/feed", "reason": "acme's own"},
        headers=acme["operate"],
    )
    assert own.status_code == 201, own.text
    # a dataset id globex holds is refused with a clear conflict (ids are deployment-wide)
    taken = await api.http.post(
        "/v1/datasets", json=_registration("globex-data"), headers=acme["submit"]
    )
    assert taken.status_code == 409, taken.text
    assert MARKER not in taken.text
    assert _globex_state(api) == before
    # the same idempotency key in another tenant is a new job, not globex's (nor a 409)
    mine = await api.http.post(
        "/v1/jobs",
        json={"kind": "plain", "payload": {}},
        headers={**acme["submit"], "Idempotency-Key": "shared-idempotency-key"},
    )
    assert mine.status_code == 202 and mine.json()["outcome"] == "created"
    assert str(mine.json()["id"]) != ids["job_id"]


async def test_only_a_platform_key_crosses_and_it_is_audited(api: Api) -> None:
    await make_tenants(api.asgi.state.herald.client.pool, "acme", "globex")
    acme = await _keys(api, "acme", ("admin",))
    ops = await _keys(api, "default", ("platform",))
    globex = await _keys(api, "globex", ("admin",))
    ids = await _seed_globex(api, globex["admin"])
    job = f"/v1/jobs/{ids['job_id']}"
    as_globex = {"Herald-Tenant": "globex"}
    refused = await api.http.get(job, headers={**acme["admin"], **as_globex})
    assert refused.status_code == 403
    assert (await api.http.get(job, headers=ops["platform"])).status_code == 404
    seen = await api.http.get(job, headers={**ops["platform"], **as_globex})
    assert seen.status_code == 200 and MARKER in seen.text
    everyone = await api.http.get("/v1/jobs", headers={**ops["platform"], "Herald-Tenant": "*"})
    assert everyone.status_code == 200
    assert [j["id"] for j in everyone.json()] == [int(ids["job_id"])]
    log = await api.http.get(
        "/v1/audit", params={"action": "platform.act_for"}, headers=ops["platform"]
    )
    assert [(e["target_id"], e["reason"]) for e in log.json()] == [
        ("*", "GET /v1/jobs"),
        ("globex", f"GET {job}"),
    ]
    assert all(e["actor"] == "default-platform@default" for e in log.json())
    # Acting for every tenant, the cancel of globex's job is globex's record (and the
    # platform's), and globex's own log shows who acted for it.
    cancel = await api.http.post(
        f"{job}/cancel",
        json={"reason": "operator"},
        headers={**ops["platform"], "Herald-Tenant": "*"},
    )
    assert cancel.status_code == 200, cancel.text
    theirs = await api.http.get("/v1/audit", headers=globex["admin"])
    by_ops = [e for e in theirs.json() if e["actor"].startswith("default-platform")]
    assert [(e["action"], e["target_id"], e["actor"]) for e in by_ops] == [
        ("cancel", ids["job_id"], "default-platform"),
        ("platform.act_for", "globex", "default-platform@default"),
    ]
