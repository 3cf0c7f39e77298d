"""Every route, tried with no key and with a key of each scope: what each may reach.

The expected scope of each route is written here once; the test fails when a route is
added without an entry, and when any route answers a scope it should refuse (or refuses
one it should answer).
"""

from __future__ import annotations

import re
from typing import Any

from tests.security.conftest import Api

# (method, path) -> the scope it needs; None: no key needed.
EXPECTED: dict[tuple[str, str], str | None] = {
    ("GET", "/healthz"): None,
    ("GET", "/readyz"): None,
    ("GET", "/metrics"): None,
    ("POST", "/v1/jobs"): "submit",
    ("GET", "/v1/jobs"): "read",
    ("GET", "/v1/jobs/{job_id}"): "read",
    ("POST", "/v1/jobs/{job_id}/cancel"): "operate",
    ("POST", "/v1/jobs/{job_id}/retry"): "operate",
    ("GET", "/v1/queues"): "read",
    ("GET", "/v1/dead-letters"): "read",
    ("GET", "/v1/dead-letters/{dead_letter_id}"): "read",
    ("POST", "/v1/dead-letters/{dead_letter_id}/replay"): "operate",
    ("POST", "/v1/dead-letters/{dead_letter_id}/discard"): "operate",
    ("GET", "/v1/audit"): "read",
    ("POST", "/v1/schedules"): "operate",
    ("GET", "/v1/schedules"): "read",
    ("GET", "/v1/schedules/{schedule_id}"): "read",
    ("GET", "/v1/schedules/{schedule_id}/fires"): "read",
    ("PATCH", "/v1/schedules/{schedule_id}"): "operate",
    ("DELETE", "/v1/schedules/{schedule_id}"): "operate",
    ("POST", "/v1/schedules/{schedule_id}/pause"): "operate",
    ("POST", "/v1/schedules/{schedule_id}/resume"): "operate",
    ("POST", "/v1/datasets"): "submit",
    ("GET", "/v1/datasets"): "read",
    ("GET", "/v1/datasets/{dataset_id}"): "read",
    ("POST", "/v1/datasets/{dataset_id}/publications"): "submit",
    ("GET", "/v1/datasets/{dataset_id}/versions"): "read",
    ("GET", "/v1/datasets/{dataset_id}/versions/{version}"): "read",
    ("DELETE", "/v1/datasets/{dataset_id}/versions/{version}"): "operate",
    ("GET", "/v1/datasets/{dataset_id}/versions/{version}/files/{name}"): "read",
    ("HEAD", "/v1/datasets/{dataset_id}/versions/{version}/files/{name}"): "read",
    ("GET", "/v1/catalog"): "read",
    ("GET", "/v1/catalog/combined"): "read",
    ("GET", "/v1/sparql"): "read",
    ("POST", "/v1/sparql"): "read",
    ("POST", "/v1/generations/runs"): "submit",
    ("GET", "/v1/generations/runs/{run_id}"): "read",
    ("GET", "/v1/generations/datasets/{dataset}/partitions/{partition}"): "operate",
    ("POST", "/v1/generations/datasets/{dataset}/partitions/{partition}/actions"): "operate",
    ("GET", "/v1/generations/datasets/{dataset}/partitions/{partition}/current"): "read",
    ("GET", "/v1/generations/feed"): "read",
    ("GET", "/v1/generations/datasets/{dataset}/quarantine"): "operate",
    ("POST", "/v1/generations/quarantine/{item_id}/{action}"): "operate",
    ("POST", "/v1/generations/subscriptions"): "operate",
    ("POST", "/v1/generations/backfills"): "operate",
    ("GET", "/v1/generations/backfills/{backfill_id}"): "read",
    # the social application's routes (herald.api.social)
    ("GET", "/health"): None,
    ("POST", "/users"): "operate",
    ("GET", "/accounts"): "read",
    ("POST", "/accounts"): "operate",
    ("DELETE", "/accounts/{account_id}"): "operate",
    ("POST", "/social/posts"): "submit",
    ("GET", "/jobs/{job_id}"): "read",
    ("GET", "/dlq/{service}"): "read",
    ("POST", "/dlq/{service}/{message_id}/replay"): "operate",
    ("GET", "/v1/ingest/providers"): "read",
    ("GET", "/v1/ingest/providers/{name}"): "read",
    ("PUT", "/v1/ingest/providers/{name}"): "operate",
    ("POST", "/v1/ingest/providers/{name}/fetch"): "submit",
    ("GET", "/v1/ingest/runs"): "read",
    ("GET", "/v1/ingest/runs/{run_id}"): "read",
    ("GET", "/v1/ingest/quarantine"): "read",
    ("GET", "/search"): "read",
    ("GET", "/v1/search"): "read",
}
SAMPLE = {
    "job_id": "1",
    "dead_letter_id": "1",
    "schedule_id": "1",
    "dataset_id": "d",
    "version": "1",
    "name": "d.csv",
    "run_id": "1",
    "dataset": "orders",
    "partition": "2026-07-14",
    "item_id": "1",
    "action": "discard",
    "backfill_id": "1",
    "account_id": "1",
    "service": "social",
    "message_id": "1",
}


def _routes(api: Api) -> set[tuple[str, str]]:
    """Every operation the API declares (its OpenAPI document lists them all)."""
    paths = api.asgi.openapi()["paths"]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: SAMPLE[m.group(1)], path)


async def test_every_route_with_every_scope_and_no_key(api: Api) -> None:
    assert _routes(api) == set(EXPECTED), "a route was added or removed: list its scope here"
    for (method, path), needed in sorted(EXPECTED.items()):
        url = _concrete(path)
        body: dict[str, Any] | None = {} if method in ("POST", "PATCH", "DELETE") else None
        anonymous = await api.http.request(method, url, json=body)
        if needed is None:
            assert anonymous.status_code in (200, 503), (method, path, anonymous.status_code)
            continue
        assert anonymous.status_code == 401, (method, path)
        for scope in ("submit", "read", "operate", "admin"):
            r = await api.http.request(method, url, json=body, headers=api.auth(scope))
            allowed = scope in (needed, "admin")
            if allowed:  # past the scope check: whatever the (empty) request deserves
                assert r.status_code not in (401, 403) or "internal" in r.text, (
                    method,
                    path,
                    scope,
                )
            else:
                assert r.status_code == 403, (method, path, scope, r.status_code, r.text)
