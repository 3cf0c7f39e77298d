"""Every housekeeping duty handles every tenant's rows, and writes each tenant's as its.

Rows of two tenants are written straight into the tables (naming each row's tenant);
then each duty of the deployment makes one pass, as the housekeeper runs it, logged in
as a role with no superuser rights (a member of the runtime role, as in production), so
row-level security applies to every connection a duty opens. A duty that saw one
tenant's rows only (a connection left acting for the default tenant, a pass run for
one tenant) leaves the other tenant's rows untouched and fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from herald.config import Settings
from herald.generations import sample
from herald.ingest.jobs import register_ingest
from herald.ingest.providers import PROCESS
from herald.ops.housekeeping import Housekeeper
from herald.registry import Herald
from tests.support import APP
from tests.tenancy_kit import make_tenants

TENANTS = ("acme", "globex")


@pytest.fixture
def su(settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    """The migrating role (no row-level security): to seed and to check."""
    conn = psycopg.connect(
        settings.database_url or "", options=f"-c search_path={settings.schema}", autocommit=True
    )
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def operating(settings: Settings, su: psycopg.Connection[Any]) -> Settings:
    """``settings`` logged in as a role without superuser rights, in the runtime role."""
    su.execute(
        "DO $$ BEGIN CREATE ROLE herald_duty_test LOGIN IN ROLE herald_runtime; "
        "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
    )
    url = conninfo_to_dict(settings.database_url or "")
    return settings.with_(database_url=make_conninfo("", **{**url, "user": "herald_duty_test"}))


@asynccontextmanager
async def _keeper(app: Herald, settings: Settings) -> AsyncIterator[Housekeeper]:
    keeper = await Housekeeper.open(app, settings, holder="test")
    try:
        await make_tenants(keeper.pool, *TENANTS)
        assert await keeper.hold_once() == {d.name for d in keeper.duties}
        yield keeper
    finally:
        await keeper.close()


async def _run(keeper: Housekeeper, name: str) -> None:
    (duty,) = [d for d in keeper.duties if d.name == name or d.name.startswith(name)]
    errors = keeper.stats.errors
    assert await keeper.run_due(duty)
    assert keeper.stats.errors == errors, f"duty {duty.name} failed"


def _by_tenant(su: psycopg.Connection[Any], query: str) -> dict[str, Any]:
    return {row[0]: row[1] for row in su.execute(query).fetchall()}


async def test_the_engines_duties_handle_every_tenants_dead_letters_and_queues(
    operating: Settings, su: psycopg.Connection[Any]
) -> None:
    async with _keeper(APP, operating) as keeper:
        for n, tenant in enumerate(TENANTS):
            # one past retention (compensated), one owing its compensation (no hook)
            su.execute(
                "INSERT INTO dead_letters (tenant_id, job_id, kind, queue, version, payload, "
                "attempt, errors, reason, created_at, cleanup_state, cleanup_done_at) "
                "VALUES (%s, %s, 'noop', 'default', 1, '{}', 1, '[]', 'permanent', "
                "now() - interval '400 days', 'done', now())",
                (tenant, 1000 + n),
            )
            su.execute(
                "INSERT INTO dead_letters (tenant_id, job_id, kind, queue, version, payload, "
                "attempt, errors, reason) VALUES (%s, %s, 'noop', 'default', 1, '{}', 1, "
                "'[]', 'permanent')",
                (tenant, 2000 + n),
            )
            su.execute(
                "INSERT INTO jobs (tenant_id, kind, queue, payload) "
                "VALUES (%s, 'noop', 'tenants', '{}')",
                (tenant,),
            )
        await _run(keeper, "dead-letter-bounds")
        await _run(keeper, "cleanup:")
        await _run(keeper, "queue-samples")
    left = _by_tenant(
        su, "SELECT tenant_id, array_agg(job_id ORDER BY job_id) FROM dead_letters GROUP BY 1"
    )
    assert left == {"acme": [2000], "globex": [2001]}  # past retention: gone in both
    owed = _by_tenant(su, "SELECT tenant_id, array_agg(cleanup_state) FROM dead_letters GROUP BY 1")
    assert owed == {"acme": ["not_needed"], "globex": ["not_needed"]}
    (sampled,) = su.execute("SELECT queues -> 'tenants' FROM queue_samples").fetchone() or [None]
    assert sampled is not None and sampled["available"] == 2  # both tenants' jobs counted


async def test_the_ingestion_duty_handles_and_readmits_each_tenants_runs_as_its_own(
    operating: Settings, su: psycopg.Connection[Any]
) -> None:
    app = Herald()
    register_ingest(app, operating)
    async with _keeper(app, operating) as keeper:
        for n, tenant in enumerate(TENANTS):
            su.execute(
                "INSERT INTO ingest_providers (tenant_id, name, url, format) "
                "VALUES (%s, %s, 'https://feed.example.org/x', 'csv')",
                (tenant, f"{tenant}-feed"),
            )
            run = su.execute(
                "INSERT INTO ingest_runs (tenant_id, provider, state, job_id, job_fence, "
                "snapshot_at, staged_at, rows_staged) VALUES (%s, %s, 'staged', %s, 1, "
                "now(), now(), 1) RETURNING id",
                (tenant, f"{tenant}-feed", 3000 + n),
            ).fetchone()
            assert run is not None
            su.execute(
                "INSERT INTO ingest_quarantine (tenant_id, run_id, provider, reason, raw, "
                "truncated, byte_offset, line, created_at, expires_at) VALUES (%s, %s, %s, "
                "'bad', 'x', false, 0, 1, now() - interval '2 days', now() - interval '1 day')",
                (tenant, run[0], f"{tenant}-feed"),
            )
        await _run(keeper, "ingest.requeue")
    assert su.execute("SELECT count(*) FROM ingest_quarantine").fetchone() == (0,)
    readmitted = su.execute(
        "SELECT j.tenant_id, r.tenant_id FROM jobs j "
        "JOIN ingest_runs r ON r.id = (j.payload ->> 'run_id')::bigint WHERE j.kind = %s",
        (PROCESS,),
    ).fetchall()
    # each run's processing is admitted once, as a job of the run's own tenant
    assert sorted(readmitted) == [("acme", "acme"), ("globex", "globex")]


async def test_the_generations_duties_handle_every_tenants_quarantine(
    operating: Settings, su: psycopg.Connection[Any]
) -> None:
    gens = sample.gens
    gens.use(operating)
    async with _keeper(gens.app, operating) as keeper:
        for tenant in TENANTS:
            su.execute(
                "INSERT INTO gen_datasets (tenant_id, name, owner, schema_version, fields) "
                "VALUES (%s, %s, 'team', 1, '{a}')",
                (tenant, f"{tenant}-gen"),
            )
            su.execute(
                "INSERT INTO gen_quarantine (tenant_id, dataset, owner, reason_code, detail, "
                "quarantined_at, expires_at) VALUES (%s, %s, 'team', 'bad_record', 'x', "
                "now() - interval '2 days', now() - interval '1 day')",
                (tenant, f"{tenant}-gen"),
            )
        await _run(keeper, "generations.quarantine_expiry")
        await _run(keeper, "generations.orphan_collection")
    states = _by_tenant(su, "SELECT tenant_id, state FROM gen_quarantine")
    assert states == {"acme": "expired", "globex": "expired"}
