"""Tenant management: create, list, set quotas. A platform operator's work.

Each function acts for the platform (it reaches every tenant's row) and writes an audit
record of who did it in the same transaction. See :mod:`herald.tenancy` for how a
tenant's rows are kept apart and :mod:`herald.quotas` for what the quotas mean.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from herald import sql, tenancy
from herald.db import Row
from herald.ops import audit
from herald.ops.conn import Source, connection
from herald.quotas import Quotas


class TenantExists(ValueError):
    """A tenant of that id exists already."""


class UnknownTenant(LookupError):
    """No tenant of that id."""


@dataclass(frozen=True)
class TenantSpec:
    id: str
    name: str = ""
    quotas: Quotas = field(default_factory=Quotas)

    def params(self) -> dict[str, Any]:
        return {"id": tenancy.checked(self.id), "name": self.name, **asdict(self.quotas)}


def _check_quotas(quotas: Quotas) -> None:
    if quotas.max_active_jobs is not None and quotas.max_active_jobs < 1:
        raise ValueError("max_active_jobs must be at least 1")
    if quotas.max_per_second is not None and not quotas.max_per_second > 0:
        raise ValueError("max_per_second must be a positive number")
    if quotas.max_payload_bytes is not None and quotas.max_payload_bytes < 2:
        raise ValueError("max_payload_bytes must be at least 2")


@tenancy.as_platform
async def create(source: Source, spec: TenantSpec, *, actor: str, reason: str) -> Row:
    """Create a tenant (audited); TenantExists if its id is taken."""
    _check_quotas(spec.quotas)
    params = spec.params()
    async with connection(source) as conn, conn.transaction():
        await tenancy.tell_in_transaction(conn, tenancy.PLATFORM)  # a caller's connection too
        cur = await conn.execute(sql.query("ops_tenant_create"), params)
        row = await cur.fetchone()
        if row is None:
            raise TenantExists(f"tenant {spec.id!r} exists already")
        await audit.record(conn, actor, "tenant.create", ("tenant", spec.id), reason, None, row)
    return dict(row)


@tenancy.as_platform
async def listing(source: Source) -> list[Row]:
    async with connection(source) as conn, conn.transaction():
        await tenancy.tell_in_transaction(conn, tenancy.PLATFORM)
        cur = await conn.execute(sql.query("ops_tenant_list"))
        return list(await cur.fetchall())


@tenancy.as_platform
async def set_quotas(
    source: Source, tenant: str, quotas: Quotas, *, actor: str, reason: str
) -> Row:
    """Replace a tenant's quotas (audited, with before and after)."""
    _check_quotas(quotas)
    params = {"id": tenancy.checked(tenant), **asdict(quotas)}
    async with connection(source) as conn, conn.transaction():
        await tenancy.tell_in_transaction(conn, tenancy.PLATFORM)
        cur = await conn.execute(sql.query("ops_tenant_set_quotas"), params)
        before = await cur.fetchone()
        if before is None:
            raise UnknownTenant(f"no tenant {tenant!r}")
        after = {**before, **asdict(quotas)}
        await audit.record(conn, actor, "tenant.quotas", ("tenant", tenant), reason, before, after)
    return after
