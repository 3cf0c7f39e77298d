"""Rate limits (token buckets) and concurrency limits (slots), kept in PostgreSQL.

Both are shared by every worker on the schema and decided by the database alone:

* :func:`acquire` takes one token from the bucket of a key, refilled at ``rate`` per
  second up to ``burst``, in one atomic statement; with no token available it raises
  :class:`herald.Snooze` for exactly as long as the next token needs;
* :func:`acquire_slot` takes one of ``limit`` slots of a key for the running attempt;
  the slot is held until the job stops running under that attempt's fence (finished,
  snoozed, cancelled or rescued) - no release call, nothing leaks when a worker dies.

The pruner deletes free slots and buckets idle for longer than the default retention
(full again by then), so the state of keys nobody uses any more does not pile up.

A snoozed job is not charged an attempt. Use them from a handler::

    await limits.acquire(ctx, f"account:{payload['account']}", rate=5, burst=5)

or declare them on a kind so the worker checks them before the handler runs::

    limits.declare(app, "publish", rate=limits.RateLimit(5, 5, key=by_account),
                   concurrency=limits.ConcurrencyLimit(1, key=by_account))
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn
from herald.errors import Snooze
from herald.hooks import MaintenanceHook, Pruned
from herald.ops.conn import Source, connection
from herald.registry import Herald
from herald.rows import fetch_all, maybe_row, one_row

# A limit's key: fixed, or derived from the job's payload (e.g. its downstream account).
KeyFunction = Callable[[dict[str, Any]], str]


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not 0 < len(key) <= 1000:
        raise ValueError("a limit key must be a non-empty string of at most 1000 characters")
    return key


def _pool_of(source: JobContext | Source) -> Source:
    if isinstance(source, JobContext):
        return source.pool  # the worker's pool: no connection of the handler's
    return source


async def acquire(source: JobContext | Source, key: str, rate: float, burst: float) -> datetime:
    """Take one token of ``key`` or raise :class:`Snooze` until one will be available.

    ``rate`` is tokens per second, ``burst`` the bucket's size (tokens available at once
    after a quiet spell). The latest caller's rate and burst become the bucket's. Returns
    the database time at which the token was granted.
    """
    _check_key(key)
    if not rate > 0 or not burst >= 1:
        raise ValueError("rate must be positive and burst at least 1")
    async with connection(_pool_of(source)) as conn:
        row = await one_row(
            conn, "ops_rate_acquire", {"key": key, "rate": float(rate), "burst": float(burst)}
        )
    wait = float(row["wait"])
    if wait > 0:
        raise Snooze(wait, f"rate limit {key!r}: next token in {wait:.3f}s")
    at: datetime = row["at"]
    return at


async def acquire_slot(
    source: JobContext | Source,
    key: str,
    limit: int,
    *,
    job_id: int | None = None,
    fence: int | None = None,
    retry_after: float = 1.0,
) -> int:
    """Take a slot of ``key`` for this attempt, or raise :class:`Snooze` when all
    ``limit`` slots are held by running attempts. Returns the slot number.

    From a handler pass its context; otherwise pass the running job's id and fence.
    ``retry_after`` (jittered by +-50%%) is how long a job waits before it asks again.
    """
    _check_key(key)
    if not isinstance(limit, int) or limit < 1:
        raise ValueError("a concurrency limit must be an integer of at least 1")
    if isinstance(source, JobContext):
        job_id, fence = source.job_id, source.fence
    if job_id is None or fence is None:
        raise ValueError("acquire_slot needs the running job's context, or its id and fence")
    async with connection(_pool_of(source)) as conn:
        # Inside a caller's transaction the lock lasts to its end anyway: no savepoint
        # (two more round trips) around it.
        inside = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        async with contextlib.nullcontext() if inside else conn.transaction():
            await conn.execute(sql.query("ops_concurrency_lock"), {"key": key})
            row = await maybe_row(
                conn,
                "ops_concurrency_acquire",
                {"key": key, "limit": limit, "job_id": job_id, "fence": fence},
            )
    if row is None:
        wait = retry_after * random.uniform(0.5, 1.5)
        raise Snooze(wait, f"concurrency limit {key!r}: all {limit} slots are busy")
    return int(row["slot"])


@dataclass(frozen=True)
class RateLimit:
    """A kind's token bucket; ``key`` None means one bucket for the whole kind."""

    rate: float
    burst: float = 1.0
    key: str | KeyFunction | None = None

    def __post_init__(self) -> None:
        if not self.rate > 0 or not self.burst >= 1:
            raise ValueError("rate must be positive and burst at least 1")


@dataclass(frozen=True)
class ConcurrencyLimit:
    """At most ``limit`` running jobs per key; ``key`` None means per kind."""

    limit: int
    key: str | KeyFunction | None = None
    retry_after: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError("a concurrency limit must be an integer of at least 1")
        if self.retry_after <= 0:
            raise ValueError("retry_after must be positive")


def _resolve(key: str | KeyFunction | None, kind: str, what: str, payload: dict[str, Any]) -> str:
    if key is None:
        return f"{what}:{kind}"
    if isinstance(key, str):
        return key
    return _check_key(key(payload))


@dataclass(frozen=True)
class Limits:
    """The limits a kind declares; the worker calls :meth:`enforce` before its handler."""

    rate: RateLimit | None = None
    concurrency: ConcurrencyLimit | None = None

    async def enforce(
        self, pool: AsyncConnectionPool[AsyncConn], ctx: JobContext, payload: dict[str, Any]
    ) -> None:
        """Take a slot, then a token; raise :class:`Snooze` when either is unavailable.

        The slot comes first: a job that gets a token but no slot would waste the token.
        """
        if self.concurrency is not None:
            c = self.concurrency
            key = _resolve(c.key, ctx.kind, "concurrency", payload)
            await acquire_slot(
                pool, key, c.limit, job_id=ctx.job_id, fence=ctx.fence, retry_after=c.retry_after
            )
        if self.rate is not None:
            r = self.rate
            await acquire(pool, _resolve(r.key, ctx.kind, "rate", payload), r.rate, r.burst)


def declare(
    app: Herald,
    kind: str,
    *,
    rate: RateLimit | None = None,
    concurrency: ConcurrencyLimit | None = None,
) -> Limits:
    """Give the registered ``kind`` of ``app`` a rate and/or concurrency limit."""
    limits = Limits(rate, concurrency)
    app.gate(kind, "limits", limits.enforce if rate or concurrency else None)
    return limits


@dataclass(frozen=True)
class RateBucket:
    """One token bucket (``ops_rate_stats``): its rate and size, the tokens it holds now,
    the tokens it granted and the requests it denied."""

    key: str
    rate: float
    burst: float
    tokens: float
    granted: int
    denied: int
    updated_at: datetime


async def rate_stats(conn: Source) -> list[RateBucket]:
    """Every bucket: rate, burst, current level, tokens granted and requests denied."""
    async with connection(conn) as c:
        return await fetch_all(c, "ops_rate_stats", {}, RateBucket)


# Keys whose free slots one batch deletes: each is locked (advisory) to the end of the
# batch's transaction, and locks share a bounded table in PostgreSQL.
SLOT_KEYS_BATCH = 100
BUCKETS_BATCH = 1000


async def prune_once(pool: AsyncConnectionPool[AsyncConn], settings: Settings) -> Pruned:
    """Delete one batch of free concurrency slots and long-idle token buckets.

    A slot is deleted only under its key's takers' lock, so a slot taken meanwhile is
    never deleted. A bucket idle for longer than the default retention is full again: it
    changes no decision. Run by every worker's maintenance (the ``herald.maintenance``
    entry point ``limits``).
    """
    async with pool.connection() as conn:
        cur = await conn.execute(sql.query("ops_prune_slot_keys"), {"limit": SLOT_KEYS_BATCH})
        keys = [row["key"] for row in await cur.fetchall()]
        deleted = 0
        if keys:
            async with conn.transaction():
                cur = await conn.execute(sql.query("ops_prune_slot_lock"), {"keys": keys})
                locked = [row["key"] for row in await cur.fetchall()]
                if locked:
                    cur = await conn.execute(sql.query("ops_prune_slot_delete"), {"keys": locked})
                    deleted += max(0, cur.rowcount)
        cur = await conn.execute(
            sql.query("ops_prune_rate_buckets"),
            {"retention_s": settings.default_retention, "limit": BUCKETS_BATCH},
        )
        buckets = max(0, cur.rowcount)
    return Pruned(deleted + buckets, len(keys) == SLOT_KEYS_BATCH or buckets == BUCKETS_BATCH)


PRUNE_HOOK = MaintenanceHook("limits", prune_once)
