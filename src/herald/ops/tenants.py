"""Tenant management: create, list, set quotas. A platform operator's work.

Each function acts for the platform (it reaches every tenant's row) and writes an audit
record of who did it in the same transaction. See :mod:`herald.tenancy` for how a
tenant's rows are kept apart and :mod:`herald.quotas` for what the quotas mean.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from herald import tenancy
from herald.ops import audit
from herald.ops.conn import Source, connection
from herald.quotas import Quotas
from herald.rows import fetch_all, fetch_one, to_dict


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


@dataclass(frozen=True)
class TenantQuotas:
    """A tenant's name and admission quotas (None: unlimited)."""

    id: str
    name: str
    max_active_jobs: int | None
    max_per_second: float | None
    max_payload_bytes: int | None


@dataclass(frozen=True)
class Tenant(TenantQuotas):
    """A tenant's row (``ops_tenant_list``)."""

    created_at: datetime


def _check_quotas(quotas: Quotas) -> None:
    if quotas.max_active_jobs is not None and quotas.max_active_jobs < 1:
        raise ValueError("max_active_jobs must be at least 1")
    if quotas.max_per_second is not None and not quotas.max_per_second > 0:
        raise ValueError("max_per_second must be a positive number")
    if quotas.max_payload_bytes is not None and quotas.max_payload_bytes < 2:
        raise ValueError("max_payload_bytes must be at least 2")


@tenancy.as_platform
async def create(source: Source, spec: TenantSpec, *, actor: str, reason: str) -> Tenant:
    """Create a tenant (audited); TenantExists if its id is taken."""
    _check_quotas(spec.quotas)
    params = spec.params()
    async with connection(source) as conn, conn.transaction():
        await tenancy.tell_in_transaction(conn, tenancy.PLATFORM)  # a caller's connection too
        row = await fetch_one(conn, "ops_tenant_create", params, Tenant)
        if row is None:
            raise TenantExists(f"tenant {spec.id!r} exists already")
        await audit.record(
            conn, actor, "tenant.create", ("tenant", spec.id), reason, None, to_dict(row)
        )
    return row


@tenancy.as_platform
async def listing(source: Source) -> list[Tenant]:
    async with connection(source) as conn, conn.transaction():
        await tenancy.tell_in_transaction(conn, tenancy.PLATFORM)
        return await fetch_all(conn, "ops_tenant_list", {}, Tenant)


@tenancy.as_platform
async def set_quotas(
    source: Source, tenant: str, quotas: Quotas, *, actor: str, reason: str
) -> TenantQuotas:
    """Replace a tenant's quotas (audited, with before and after); returns them."""
    _check_quotas(quotas)
    params = {"id": tenancy.checked(tenant), **asdict(quotas)}
    async with connection(source) as conn, conn.transaction():
        await tenancy.tell_in_transaction(conn, tenancy.PLATFORM)
        before = await fetch_one(conn, "ops_tenant_set_quotas", params, TenantQuotas)
        if before is None:
            raise UnknownTenant(f"no tenant {tenant!r}")
        after = replace(before, **asdict(quotas))
        await audit.record(
            conn,
            actor,
            "tenant.quotas",
            ("tenant", tenant),
            reason,
            to_dict(before),
            to_dict(after),
        )
    return after
