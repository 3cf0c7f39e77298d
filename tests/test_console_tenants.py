"""The console with two tenants: a key of either signs in and sees, and acts on, its
own tenant's records only; its actions are audited in its tenant, with the key.

The records are written straight into the tables (as the migrating role, naming each
row's tenant), so what a page shows comes from row-level security alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from herald import tenancy
from herald.api import ApiSettings, create_app, create_key
from herald.client import Client, open_connection
from herald.config import Settings
from herald.console import install
from herald.console.registry import discover
from herald.generations import sample
from tests.console_kit import Console, sign_in
from tests.tenancy_kit import make_tenants

TENANTS = ("acme", "globex")
KIND = "generations.deliver"  # never claimed here: no worker runs
# Every page listing a tenant's records, with what marks each tenant's record on it.
PAGES = {
    "/ui/jobs": "{t}-object",
    "/ui/dead-letters": "{t}-dead",
    "/ui/datasets": "{t}-data",
    "/ui/ingestion": "{t}-feed",
    "/ui/generations": "{t}-gen",
    "/ui/social": "{t}-account",
}


@pytest.fixture
async def console(settings: Settings) -> AsyncIterator[Console]:
    """The console of an application with generations (so every page is there)."""
    gens = sample.gens
    gens.use(settings)
    api = create_app(gens.app, settings, ApiSettings())
    install(api, gens.app, extensions=discover())
    async with api.router.lifespan_context(api), await Client.open(gens.app, settings) as client:
        await make_tenants(client.pool, *TENANTS)
        yield Console(api, settings, client)


async def _key(console: Console, tenant: str, scopes: Sequence[str]) -> str:
    with tenancy.acting_as(tenant):
        async with await open_connection(console.settings) as conn:
            await tenancy.tell(conn)
            return (await create_key(conn, f"ops-{tenant}", scopes)).token


async def _seed(console: Console, t: str) -> dict[str, int]:
    """One record of tenant ``t`` in every table a console page lists."""
    with tenancy.acting_as(t):
        job = await console.client.enqueue(
            KIND, {"n": 1}, key=f"{t}-object", run_at=datetime.now(UTC) + timedelta(hours=1)
        )
    rows = {"job": job.id}
    statements = {
        "dead": "INSERT INTO dead_letters (tenant_id, job_id, kind, key, queue, version, "
        "payload, attempt, errors, reason) VALUES (%s, 900000 + %s, 'generations.deliver', "
        "%s || '-dead', 'default', 1, '{}', 1, '[]', 'permanent') RETURNING id",
        "dataset": "INSERT INTO datasets (tenant_id, id, title, description, publisher_name, "
        "publisher_uri, source) VALUES (%s, %s || '-data', 'Data', 'About', 'Pub', "
        '\'https://pub.example.org\', \'{"type": "generated", "count": 1}\') RETURNING 0 AS id',
        "provider": "INSERT INTO ingest_providers (tenant_id, name, url, format) "
        "VALUES (%s, %s || '-feed', 'https://feed.example.org/x', 'csv') RETURNING 0 AS id",
        "gen": "INSERT INTO gen_datasets (tenant_id, name, owner, schema_version, fields) "
        "VALUES (%s, %s || '-gen', 'team', 1, '{a}') RETURNING 0 AS id",
        "account": "INSERT INTO social_accounts (tenant_id, owner, provider, name, "
        "external_id, base_url, credentials) VALUES (%s, 'owner', 'webhook', "
        "%s || '-account', %s || '-ext', 'https://hook.example.org', 'x') RETURNING id",
    }
    for name, statement in statements.items():
        params: list[Any] = [t, job.id, t] if name == "dead" else [t, t, t]
        found = await console.rows(statement, *params[: statement.count("%s")])
        rows[name] = int(found[0]["id"])
    return rows


async def test_each_tenant_signs_in_and_sees_and_acts_on_its_own_records_only(
    console: Console,
) -> None:
    seeded = {t: await _seed(console, t) for t in TENANTS}
    for tenant, other in (TENANTS, TENANTS[::-1]):
        token = await _key(console, tenant, ["read", "operate"])
        async with console.browser() as http:
            csrf = await sign_in(http, token)
            for page, mark in PAGES.items():
                r = await http.get(page)
                assert r.status_code == 200, (page, r.text)
                assert mark.format(t=tenant) in r.text, (tenant, page)
                assert mark.format(t=other) not in r.text, (tenant, page)
            theirs, mine = seeded[other], seeded[tenant]
            for url in (
                f"/ui/jobs/{theirs['job']}",
                f"/ui/dead-letters/{theirs['dead']}",
                f"/ui/datasets/{other}-data",
                f"/ui/ingestion/providers/{other}-feed",
                f"/ui/generations/{other}-gen",
                f"/ui/social/accounts/{theirs['account']}",
            ):
                assert (await http.get(url)).status_code == 404, url
            assert (await http.get(f"/ui/jobs/{mine['job']}")).status_code == 200
            run = "/ui/actions/job.cancel/run"
            for target in (theirs["job"], mine["job"]):
                done = await http.post(
                    run, data={"csrf": csrf, "target": str(target), "reason": f"by {tenant}"}
                )
                assert done.status_code == 303, done.text
    jobs = await console.rows("SELECT tenant_id, state FROM jobs ORDER BY tenant_id")
    assert [(j["tenant_id"], j["state"]) for j in jobs] == [
        ("acme", "cancelled"),
        ("globex", "cancelled"),
    ]
    entries = await console.rows(
        "SELECT tenant_id, actor, action, target_id, reason FROM audit_log "
        "WHERE action = 'cancel' ORDER BY tenant_id"
    )
    assert [(e["tenant_id"], e["actor"], e["target_id"], e["reason"]) for e in entries] == [
        ("acme", "ops-acme", str(seeded["acme"]["job"]), "by acme"),
        ("globex", "ops-globex", str(seeded["globex"]["job"]), "by globex"),
    ]
