"""Tenants kept apart by the database: row-level security through Herald's own pools.

The tables are read from the catalog, so a table added later without isolation fails
here; the reads are raw statements with no tenant filter of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

import psycopg
import pytest

from herald import sql, tenancy
from herald.api import create_key
from herald.client import Client, JobSpec, Outcome
from herald.config import Settings
from herald.errors import QuotaExceeded
from herald.ops import audit, limits
from herald.ops import jobs as job_ops
from herald.ops.errors import Conflict
from herald.schedules.scheduler import Scheduler
from herald.schedules.store import ScheduleSpec, create_schedule
from herald.social.accounts import create_user
from tests.support import running_worker, wait_for_job
from tests.tenancy_kit import PLATFORM_TABLES, make_tenants, tables_of, tenants_seen


async def test_every_table_but_the_platforms_is_owned_and_isolated(
    client: Client, settings: Settings
) -> None:
    async with client.pool.connection() as conn:
        tables = await tables_of(conn, settings.schema)
    assert set(tables) | {"console_sessions"} >= PLATFORM_TABLES
    for name, table in tables.items():
        if name in PLATFORM_TABLES:
            continue
        assert table["owned"], f"{name} has no tenant_id column"
        assert table["rls"] and table["forced"], f"{name} is not under row-level security"
        assert "herald_tenant()" in (table["policy"] or ""), (name, table["policy"])


async def test_the_runtime_connection_is_no_superuser_and_acts_for_its_tenant(
    client: Client,
) -> None:
    await make_tenants(client.pool, "acme")
    with tenancy.acting_as("acme"):
        async with client.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT current_user AS who, herald_tenant() AS tenant, r.rolsuper, "
                "r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user"
            )
            row = await cur.fetchone()
    assert row == {
        "who": "herald_runtime",
        "tenant": "acme",
        "rolsuper": False,
        "rolbypassrls": False,
    }


async def _populate(client: Client, settings: Settings, tenant: str) -> None:
    """Rows of this tenant in every table the engine and its services own."""
    with tenancy.acting_as(tenant):
        await client.enqueue("noop", {"n": 1}, key="shared-object", idempotency_key="same-key")
        await client.enqueue("noop", {"n": 2})
        await audit.record(client.pool, f"key-{tenant}", "test", ("job", 1), "populate")
        await limits.acquire(client.pool, "shared-limit", 10, 10)
        spec = ScheduleSpec("noop", "report", "daily", "UTC", at=time(9))
        await create_schedule(client.pool, spec, actor=f"key-{tenant}", reason="populate")
        async with client.pool.connection() as conn:
            await create_key(conn, "same-name", ["read"])


async def test_a_raw_statement_through_the_runtime_pool_sees_only_its_tenant(
    client: Client, settings: Settings, database: str
) -> None:
    await make_tenants(client.pool, "acme", "globex")
    for tenant in ("acme", "globex"):
        await _populate(client, settings, tenant)
    # what the engine writes for the platform: dead letters, rescues, stale writes
    with psycopg.connect(database, options=f"-c search_path={settings.schema}") as su:
        for job_id, tenant in enumerate(("acme", "globex"), start=1):
            su.execute(
                "INSERT INTO dead_letters (tenant_id, job_id, kind, queue, version, payload, "
                "attempt, errors, reason) VALUES (%s, %s, 'noop', 'default', 1, '{}', 1, '[]', "
                "'permanent')",
                (tenant, job_id),
            )
            su.execute(
                "INSERT INTO rescues (tenant_id, job_id, fence, owner, outcome) "
                "VALUES (%s, 1, 1, 'w', 'waiting')",
                (tenant,),
            )
            su.execute(
                "INSERT INTO stale_writes (tenant_id, job_id, fence, operation) "
                "VALUES (%s, 1, 1, 'finish')",
                (tenant,),
            )
    async with client.pool.connection() as conn:
        tables = await tables_of(conn, settings.schema)
    populated = 0
    for name in sorted(tables):
        if name in PLATFORM_TABLES:
            continue
        with tenancy.platform():
            everyone = await tenants_seen(client.pool, name, tenancy.PLATFORM)
        assert await tenants_seen(client.pool, name, "acme") == everyone & {"acme"}, name
        assert await tenants_seen(client.pool, name, "globex") == everyone & {"globex"}, name
        assert await tenants_seen(client.pool, name, "default") <= {"default"}, name
        populated += {"acme", "globex"} <= everyone
    assert populated >= 10  # jobs, keys, versions, audit, limits, schedules, letters...


async def test_a_write_cannot_reach_or_create_another_tenants_rows(client: Client) -> None:
    await make_tenants(client.pool, "acme", "globex")
    with tenancy.acting_as("globex"):
        theirs = await client.enqueue("noop", {})
    with tenancy.acting_as("acme"):
        async with client.pool.connection() as conn:
            cur = await conn.execute("UPDATE jobs SET priority = 9")
            assert cur.rowcount == 0
            cur = await conn.execute("DELETE FROM jobs WHERE id = %s", (theirs.id,))
            assert cur.rowcount == 0
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                await conn.execute("INSERT INTO jobs (tenant_id, kind) VALUES ('globex', 'noop')")
        assert await client.get_job(theirs.id) is None
    with tenancy.acting_as("globex"):
        row = await client.get_job(theirs.id)
    assert row is not None and row.priority == 0


async def test_idempotency_object_and_limit_keys_are_per_tenant(client: Client) -> None:
    await make_tenants(client.pool, "acme", "globex")
    admitted = {}
    for tenant in ("acme", "globex"):
        with tenancy.acting_as(tenant):
            by_idem = await client.enqueue("noop", {"t": tenant}, idempotency_key="order-1")
            by_key = await client.enqueue("noop", {}, key="object-1")
            many = await client.enqueue_many([JobSpec("noop", {}, key="object-2")])
            # one token each: a shared bucket would have refused the second tenant
            await limits.acquire(client.pool, "one-a-minute", 1 / 60, 1)
            admitted[tenant] = (by_idem, by_key, many[0])
    for by_idem, by_key, bulk in admitted.values():
        assert by_idem.outcome is Outcome.CREATED  # not the other tenant's replay or a 409
        assert by_key.outcome is Outcome.CREATED and by_key.version == 1
        assert bulk.outcome is Outcome.CREATED and bulk.version == 1
    assert admitted["acme"][0].id != admitted["globex"][0].id
    with tenancy.acting_as("acme"):
        again = await client.enqueue("noop", {}, key="object-1")
        replay = await client.enqueue("noop", {"t": "acme"}, idempotency_key="order-1")
    assert again.outcome is Outcome.IN_PROGRESS and again.id == admitted["acme"][1].id
    assert replay.outcome is Outcome.REPLAY and replay.id == admitted["acme"][0].id


async def test_the_worker_runs_each_job_under_its_own_tenant(
    client: Client, settings: Settings
) -> None:
    await make_tenants(client.pool, "acme", "globex")
    ids = {}
    for tenant, extra in (("acme", 0), ("globex", 2)):
        with tenancy.acting_as(tenant):
            for _ in range(extra):
                await client.enqueue("noop", {})
            ids[tenant] = (await client.enqueue("tenant_probe", {})).id
    async with running_worker(settings):
        for tenant, job_id in ids.items():
            with tenancy.acting_as(tenant):
                row = await wait_for_job(client, job_id)
            assert row["state"] == "succeeded", row
            result: dict[str, Any] = row["result"]
            assert result["context"] == result["db"] == tenant
            assert result["visible_jobs"] == (1 if tenant == "acme" else 3)


async def test_a_schedule_fires_its_job_in_its_own_tenant(client: Client) -> None:
    await make_tenants(client.pool, "acme")
    with tenancy.acting_as("acme"):
        spec = ScheduleSpec("noop", "nightly", "cron", "UTC", cron="* * * * *")
        made = await create_schedule(client.pool, spec)
        async with client.pool.connection() as conn:
            await conn.execute(
                "UPDATE schedules SET next_due_at = now() - interval '1 second' WHERE id = %s",
                (made.id,),
            )
    fired = await Scheduler(client).tick()
    assert fired.fired == 1
    with tenancy.acting_as("acme"):
        jobs = await client.list_jobs(kind="noop")
    assert [j.key for j in jobs] == ["nightly"]
    assert await client.list_jobs(kind="noop") == []  # not the default tenant's


async def test_quotas_refuse_with_a_time_to_retry(client: Client) -> None:
    await make_tenants(client.pool, "small", max_active_jobs=2)
    await make_tenants(client.pool, "slow", max_per_second=0.5)
    await make_tenants(client.pool, "thin", max_payload_bytes=200)
    with tenancy.acting_as("small"):
        await client.enqueue("noop", {})
        await client.enqueue_many([JobSpec("noop", {})])
        with pytest.raises(QuotaExceeded) as active:
            await client.enqueue("noop", {})
        with pytest.raises(QuotaExceeded):
            await client.enqueue_many([JobSpec("noop", {})])
    assert active.value.quota == "active_jobs" and active.value.retry_after >= 1
    with tenancy.acting_as("slow"):
        await client.enqueue("noop", {})
        with pytest.raises(QuotaExceeded) as rate:
            await client.enqueue("noop", {})
    assert rate.value.quota == "submissions_per_second"
    assert 1 <= rate.value.retry_after <= 2.5
    with tenancy.acting_as("thin"):
        await client.enqueue("noop", {"text": "x" * 50})
        with pytest.raises(QuotaExceeded) as size:
            await client.enqueue("noop", {"text": "x" * 300})
    assert size.value.quota == "payload_bytes"
    # other tenants are untouched by these quotas
    for _ in range(3):
        await client.enqueue("noop", {"text": "x" * 300})


async def test_tenants_are_created_once_and_audited(client: Client) -> None:
    await make_tenants(client.pool, "acme")
    with pytest.raises(ValueError):
        await make_tenants(client.pool, "acme")
    with pytest.raises(tenancy.TenantError):
        await make_tenants(client.pool, "Not A Tenant")
    entries = await audit.entries(client.pool, action="tenant.create")
    assert [e.target_id for e in entries] == ["acme"]


async def test_a_platform_action_is_audited_in_the_tenant_acted_on_and_the_platforms_log(
    client: Client, settings: Settings, database: str
) -> None:
    await make_tenants(client.pool, "acme")
    with tenancy.acting_as("acme"):
        job = await client.enqueue("noop", {}, run_at=datetime.now(UTC) + timedelta(hours=1))
    with tenancy.platform():
        await job_ops.cancel(client.pool, job.id, actor="ops@default", reason="across")
        await audit.record(client.pool, "ops@default", "note", ("report", "x"), "unknown owner")
        await audit.record(
            client.pool, "ops@default", "note", ("report", "y"), "named", tenant="acme"
        )
    with psycopg.connect(database, options=f"-c search_path={settings.schema}") as su:
        rows = su.execute(
            "SELECT tenant_id, action, target_id FROM audit_log "
            "WHERE actor = 'ops@default' ORDER BY id"
        ).fetchall()
    assert rows == [
        ("acme", "cancel", str(job.id)),
        ("default", "cancel", str(job.id)),
        ("default", "note", "x"),
        ("acme", "note", "y"),
        ("default", "note", "y"),
    ]
    # acting for a tenant, a record is that tenant's alone, whatever its target
    with tenancy.acting_as("acme"):
        entry = await audit.record(client.pool, "key@acme", "note", ("tenant", "default"), "r")
    assert entry.tenant_id == "acme"


async def test_social_names_and_keys_are_each_tenants_own(client: Client) -> None:
    await make_tenants(client.pool, "acme", "globex")
    # account 0 does not exist: the statement claims the key all the same
    claim = {"owner": "team", "key": "k-1", "body_hash": "h", "retention_s": 3600, "account_id": 0}
    for tenant in ("acme", "globex"):
        with tenancy.acting_as(tenant):
            async with client.pool.connection() as conn:
                user = await create_user(conn, "alice", f"alice@{tenant}.example.org")
                assert user.username == "alice"
                cur = await conn.execute(sql.query("social_post_key_claim"), claim)
                fresh = await cur.fetchone()
                assert fresh is not None and fresh["claimed"]  # a fresh key in each tenant
    with tenancy.acting_as("acme"):
        async with client.pool.connection() as conn:
            with pytest.raises(Conflict, match="exists already"):
                await create_user(conn, "alice", "again@acme.example.org")
            cur = await conn.execute(sql.query("social_post_key_claim"), claim)
            live = await cur.fetchone()
            assert live is not None and not live["claimed"]  # an earlier request's, here


async def test_a_claim_takes_turns_between_tenants(client: Client) -> None:
    """A flood of one tenant's older jobs does not keep another's out of the batch."""
    await make_tenants(client.pool, "flood", "quiet")
    with tenancy.acting_as("flood"):
        await client.enqueue_many([JobSpec("noop", {}, priority=5) for _ in range(300)])
    with tenancy.acting_as("quiet"):
        quiet = {e.id for e in await client.enqueue_many([JobSpec("noop", {})] * 3)}
    params = {
        "queues": ["default"],
        "kinds": ["noop"],
        "suspects": 0,
        "limit": 10,
        "owner": "test",
        "lease_s": 30,
    }
    with tenancy.platform():
        async with client.pool.connection() as conn:
            cur = await conn.execute(sql.query("claim"), params)
            batch = await cur.fetchall()
    tenants = [row["tenant_id"] for row in batch]
    assert len(batch) == 10 and tenants.count("quiet") == 3
    assert quiet <= {row["id"] for row in batch}


async def test_metrics_count_every_tenants_jobs_under_a_tenant_label(client: Client) -> None:
    from herald.metrics import HeraldMetrics

    await make_tenants(client.pool, "acme")
    with tenancy.acting_as("acme"):
        await client.enqueue("noop", {})
    await client.enqueue("noop", {})
    metrics = HeraldMetrics()
    await metrics.refresh(client.pool)  # a public scrape: for the whole deployment
    text = metrics.render().decode()
    assert 'herald_tenant_jobs{state="waiting",tenant="acme"} 1.0' in text
    assert 'herald_tenant_jobs{state="waiting",tenant="default"} 1.0' in text
