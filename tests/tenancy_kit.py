"""Tenants in tests: make some, act for them, and the tables a schema isolates."""

from __future__ import annotations

from typing import Any

from psycopg.sql import SQL, Identifier

from herald import tenancy
from herald.ops import tenants
from herald.quotas import Quotas

# Tables that belong to no tenant: the migration ledger, the tenants themselves (their
# own policy: a tenant sees its row), the housekeeping duties and queue samples (the
# deployment's), console sessions (looked up by their secret before any tenant is
# known; each names its key, which belongs to a tenant) and the social circuit breakers
# (one per remote service: its health is the same for every tenant).
PLATFORM_TABLES = {
    "schema_migrations",
    "tenants",
    "duties",
    "queue_samples",
    "console_sessions",
    "social_breakers",
}


async def make_tenants(pool: Any, *names: str, **quotas: Any) -> None:
    for name in names:
        spec = tenants.TenantSpec(name, name.title(), Quotas(**quotas))
        await tenants.create(pool, spec, actor="test", reason="a tenant for the test")


async def tables_of(conn: Any, schema: str) -> dict[str, dict[str, Any]]:
    """Every table of ``schema`` with its security flags and policy, from the catalog."""
    cur = await conn.execute(
        """
        SELECT c.relname AS name, c.relrowsecurity AS rls, c.relforcerowsecurity AS forced,
               EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                       AND a.attname = 'tenant_id' AND NOT a.attisdropped) AS owned,
               (SELECT string_agg(p.polname || ':' || pg_get_expr(p.polqual, p.polrelid), ';')
                FROM pg_policy p WHERE p.polrelid = c.oid) AS policy
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p')
        """,
        {"schema": schema},
    )
    return {row["name"]: row for row in await cur.fetchall()}


async def tenants_seen(pool: Any, table: str, tenant: str) -> set[str]:
    """The tenants of the rows of ``table`` a raw statement sees, acting for ``tenant``."""
    with tenancy.acting_as(tenant):
        async with pool.connection() as conn:
            cur = await conn.execute(
                SQL("SELECT DISTINCT tenant_id FROM {}").format(Identifier(table))
            )
            return {row["tenant_id"] for row in await cur.fetchall()}
