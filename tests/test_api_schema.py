"""The served OpenAPI document drives schemathesis against the app: no input, valid or
not, makes the API answer with a server error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase
from hypothesis.errors import Unsatisfiable
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode
from schemathesis.python import asgi

from herald.api import ApiSettings, create_app, create_key
from herald.catalog.pipeline import close_embedded_store
from herald.client import Client, open_connection
from herald.config import Settings
from herald.db import AsyncConn
from tests.support import APP

# Requests per operation, valid and invalid; derandomized, so every run sends the same.
EXAMPLES = {GenerationMode.POSITIVE: 8, GenerationMode.NEGATIVE: 6}


def _fuzz(app: FastAPI, token: str) -> tuple[int, list[str]]:
    """Every operation, valid and invalid inputs; returns (requests sent, server errors)."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    auth = {"Authorization": f"Bearer {token}"}
    sent = 0
    errors: list[str] = []
    try:
        for result in schema.get_all_operations():
            assert isinstance(result, Ok), f"the served OpenAPI document is invalid: {result}"
            operation = result.ok()
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @hypothesis.settings(
                    max_examples=EXAMPLES[mode],
                    derandomize=True,
                    deadline=None,
                    database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
                def check(case: Any) -> None:
                    nonlocal sent
                    response = case.call(headers=auth)
                    sent += 1
                    if response.status_code >= 500:
                        errors.append(
                            f"{case.method} {case.formatted_path} -> {response.status_code}: "
                            f"{response.text[:300]}"
                        )

                try:
                    check()
                except Unsatisfiable:
                    # No invalid request exists (no parameters, no body): nothing to send.
                    assert mode is GenerationMode.NEGATIVE, operation.label
    finally:
        asgi.shutdown_lifespans()
    return sent, errors


async def _seed(client: Client, conn: AsyncConn) -> None:
    """A few objects with small ids, so generated ids also reach existing records."""
    for n in range(1, 4):
        await client.enqueue("echo", {"n": n}, key=f"k{n}", conn=conn)
    await conn.execute(
        "INSERT INTO dead_letters (job_id, kind, queue, key, version, payload, attempt, errors,"
        " reason) VALUES (1, 'echo', 'default', 'k1', 1, '{}', 1, '[]', 'permanent')"
    )
    await conn.execute(
        "INSERT INTO schedules (kind, key, frequency, timezone, at_time, next_due_at)"
        " VALUES ('noop', 'nightly', 'daily', 'UTC', '03:00', herald_now())"
    )
    await conn.execute(
        "INSERT INTO datasets (id, title, description, publisher_name, publisher_uri, source)"
        " VALUES ('0', 'Zero', '', 'Office', 'https://example.org', '{\"type\": \"generated\"}')"
    )
    await conn.execute("INSERT INTO dataset_versions (dataset_id, version) VALUES ('0', 1)")


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_openapi_is_served_and_fuzzing_finds_no_server_error(
    settings: Settings, client: Client, tmp_path: Path
) -> None:
    settings = settings.with_(data_dir=tmp_path)  # the catalog's stores live there
    app = create_app(APP, settings, ApiSettings())
    async with await open_connection(settings) as conn:
        token = (await create_key(conn, "fuzzer", ["admin"])).token
        await _seed(client, conn)
    try:
        sent, errors = await asyncio.to_thread(_fuzz, app, token)
    finally:
        close_embedded_store(settings)
    assert errors == []
    assert sent > 100
