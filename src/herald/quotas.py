"""Per-tenant admission quotas: active jobs, submissions per second, payload bytes.

A tenant row may set any of three quotas (NULL: unlimited): ``max_active_jobs`` (jobs
waiting or running), ``max_per_second`` (a token bucket of that rate whose burst is one
second's worth) and ``max_payload_bytes`` (the stored payloads of its active jobs
together). An admission over one raises :class:`herald.errors.QuotaExceeded` with a
``retry_after``; the HTTP API answers it with 429 and a ``Retry-After`` header.

Checked inside the admission's own transaction, under a per-tenant lock, so concurrent
admissions of one tenant count in turn and never overshoot. A tenant without quotas
(the default) pays one cached look-up, no lock and no count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from herald import sql, tenancy
from herald.db import AnyConn
from herald.errors import AdmissionError, QuotaExceeded
from herald.rows import maybe_row

# Seconds a tenant's quotas are remembered (a change takes effect within this).
CACHE_SECONDS = 2.0
# Retry-After (seconds) for the quotas freed by jobs finishing rather than by time.
ACTIVE_RETRY_AFTER = 5.0


@dataclass(frozen=True)
class Quotas:
    max_active_jobs: int | None = None
    max_per_second: float | None = None
    max_payload_bytes: int | None = None

    @property
    def any(self) -> bool:
        return any(
            v is not None
            for v in (self.max_active_jobs, self.max_per_second, self.max_payload_bytes)
        )


NONE = Quotas()


class QuotaCache:
    """Each tenant's quotas, read at most every :data:`CACHE_SECONDS`."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[float, Quotas]] = {}

    async def of_current(self, conn: AnyConn) -> Quotas:
        tenant = tenancy.current()
        if tenant == tenancy.PLATFORM:
            return NONE  # the platform context admits nothing by itself (no tenant)
        seen = self._seen.get(tenant)
        if seen is not None and time.monotonic() - seen[0] < CACHE_SECONDS:
            return seen[1]
        row = await maybe_row(conn, "tenant_quotas")
        if row is None:  # its jobs would never be claimed: refuse them now
            raise AdmissionError(f"no tenant {tenant!r}: create it first (herald tenant create)")
        found = Quotas(row["max_active_jobs"], row["max_per_second"], row["max_payload_bytes"])
        self._seen[tenant] = (time.monotonic(), found)
        return found


async def enforce(conn: AnyConn, quotas: Quotas, jobs: int, payload_bytes: int) -> None:
    """Raise QuotaExceeded unless ``jobs`` more jobs (``payload_bytes`` of payload) fit.

    Call inside the admission's transaction: the lock is held until it ends."""
    tenant = tenancy.current()
    await conn.execute(sql.query("tenant_quota_lock"))
    if quotas.max_active_jobs is not None or quotas.max_payload_bytes is not None:
        usage = await maybe_row(conn, "tenant_active_usage")
        active, stored = (usage["jobs"], usage["bytes"]) if usage else (0, 0)
        if quotas.max_active_jobs is not None and active + jobs > quotas.max_active_jobs:
            raise QuotaExceeded(
                tenant,
                "active_jobs",
                f"{quotas.max_active_jobs} active jobs ({active} now)",
                ACTIVE_RETRY_AFTER,
            )
        if (
            quotas.max_payload_bytes is not None
            and stored + payload_bytes > quotas.max_payload_bytes
        ):
            raise QuotaExceeded(
                tenant,
                "payload_bytes",
                f"{quotas.max_payload_bytes} payload bytes in active jobs ({stored} now)",
                ACTIVE_RETRY_AFTER,
            )
    if quotas.max_per_second is not None:
        row = await maybe_row(conn, "tenant_take_tokens", {"n": float(jobs)})
        if row is not None and row["wait"] > 0:
            raise QuotaExceeded(
                tenant,
                "submissions_per_second",
                f"{quotas.max_per_second:g} submissions per second",
                float(row["wait"]),
            )
