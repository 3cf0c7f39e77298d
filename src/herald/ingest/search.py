"""The search read path: canonical plans from PostgreSQL only, behind a bulkhead and a cache.

Place in the pipeline: the API's ``GET /search`` calls :meth:`SearchService.search`. It
never touches a provider. A :class:`Bulkhead` bounds concurrent searches and refuses at
once when full (:class:`SearchSaturated`: the API answers 503 with Retry-After), so a
burst never queues behind an exhausted pool; the service's own pool has a connection for
every bulkhead slot, and a connection it cannot get within ``acquire_timeout`` (the
database is down) is :class:`SearchUnavailable`, never a hang. A :class:`PageCache`
keeps a few hot first pages (never empty ones); it is never a source of truth: every
processed batch notifies the window it changed (``herald_ingest``) and the cached pages
overlapping it are dropped, and entries expire after ``cache_ttl`` regardless.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime as dt
import json
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from herald import sql, tenancy
from herald.config import ConfigError
from herald.db import AsyncConn, Row, TenantPool, connect
from herald.ingest.errors import IngestError

log = logging.getLogger(__name__)

CHANNEL = "herald_ingest"
_EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_LATEST = dt.datetime(9999, 1, 1, tzinfo=dt.UTC)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class BadSearch(IngestError, ValueError):
    """The request is wrong (dates, cursor, limit): a 400 with this message."""


class SearchSaturated(IngestError):
    """Every bulkhead slot is taken: answer 503 at once, with Retry-After."""


class SearchUnavailable(IngestError):
    """The database could not serve the search in time."""


@dataclass(frozen=True)
class SearchSettings:
    max_concurrent: int = 16
    acquire_timeout: float = 2.0
    statement_timeout_ms: int = 5000
    default_limit: int = 50
    max_limit: int = 500
    cache_entries: int = 256
    cache_ttl: float = 30.0
    retry_after: int = 1

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SearchSettings:
        """``HERALD_SEARCH_CONCURRENCY`` (bulkhead slots) and ``HERALD_SEARCH_TIMEOUT_MS``."""
        env = os.environ if environ is None else environ
        try:
            concurrency = int(env.get("HERALD_SEARCH_CONCURRENCY") or cls.max_concurrent)
            timeout = int(env.get("HERALD_SEARCH_TIMEOUT_MS") or cls.statement_timeout_ms)
        except ValueError:
            raise ConfigError("HERALD_SEARCH_* must be whole numbers") from None
        if concurrency < 1 or timeout < 1:
            raise ConfigError("HERALD_SEARCH_* must be at least 1")
        return cls(max_concurrent=concurrency, statement_timeout_ms=timeout)


@dataclass(frozen=True)
class Window:
    starts_at: dt.datetime
    ends_at: dt.datetime


def parse_when(name: str, value: str | None) -> dt.datetime:
    if value is None or not value.strip():
        raise BadSearch(f"{name} is required (an ISO 8601 date or date-time)")
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadSearch(f"{name}={value[:64]!r} is not an ISO 8601 date or date-time") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)  # a time without an offset is UTC
    if not _EARLIEST <= parsed <= _LATEST:
        raise BadSearch(f"{name} must lie between 1970-01-01 and 9999-01-01")
    return parsed


def parse_window(starts_at: str | None, ends_at: str | None) -> Window:
    window = Window(parse_when("starts_at", starts_at), parse_when("ends_at", ends_at))
    if window.ends_at < window.starts_at:
        raise BadSearch("ends_at is before starts_at: the window is reversed")
    return window


def encode_cursor(window: Window, starts_at: dt.datetime, plan_id: int) -> str:
    data: dict[str, Any] = {
        "w": [window.starts_at.isoformat(), window.ends_at.isoformat()],
        "s": starts_at.isoformat(),
        "i": plan_id,
    }
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def decode_cursor(window: Window, cursor: str) -> tuple[dt.datetime, int]:
    """The (start, id) to continue after; the cursor must belong to the same window."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        bound = [dt.datetime.fromisoformat(w) for w in data["w"]]
        after = dt.datetime.fromisoformat(data["s"]), int(data["i"])
    except (ValueError, KeyError, TypeError, UnicodeEncodeError, binascii.Error):
        raise BadSearch("the cursor is not one this API gave") from None
    if bound != [window.starts_at, window.ends_at] or after[0].tzinfo is None:
        raise BadSearch("the cursor belongs to another window: repeat the search without it")
    return after


class Bulkhead:
    """At most ``limit`` searches at once; a caller past it is refused, never queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

    def try_enter(self) -> bool:
        if self.active >= self.limit:
            return False
        self.active += 1  # one event loop: no other task runs between check and count
        return True

    def leave(self) -> None:
        self.active -= 1


class PageCache:
    """A few first pages by (tenant, window, limit), LRU, each dropped when its window
    changes. The tenant is the one acting now: a page is never served to another."""

    def __init__(self, entries: int, ttl: float) -> None:
        self.entries = entries
        self.ttl = ttl
        self._pages: OrderedDict[tuple[dt.datetime, dt.datetime, int, str], tuple[float, Any]] = (
            OrderedDict()
        )

    def get(self, window: Window, limit: int) -> Any | None:
        key = (window.starts_at, window.ends_at, limit, tenancy.current())
        found = self._pages.get(key)
        if found is None:
            return None
        if time.monotonic() - found[0] > self.ttl:
            del self._pages[key]
            return None
        self._pages.move_to_end(key)
        return found[1]

    def put(self, window: Window, limit: int, page: Any) -> None:
        if self.entries <= 0:
            return
        key = (window.starts_at, window.ends_at, limit, tenancy.current())
        self._pages[key] = (time.monotonic(), page)
        self._pages.move_to_end(key)
        while len(self._pages) > self.entries:
            self._pages.popitem(last=False)

    def invalidate(self, changed_from: dt.datetime | None, changed_to: dt.datetime | None) -> int:
        """Drop pages whose window overlaps [changed_from, changed_to] (None: every page)."""
        if changed_from is None or changed_to is None:
            dropped = len(self._pages)
            self._pages.clear()
            return dropped
        stale = [k for k in self._pages if k[0] <= changed_to and changed_from <= k[1]]
        for key in stale:
            del self._pages[key]
        return len(stale)

    def __len__(self) -> int:
        return len(self._pages)


class SearchMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.latency = Histogram(
            "herald_ingest_search_seconds",
            "Search latency, by outcome (ok, cached, rejected, unavailable)",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.rejections = Counter(
            "herald_ingest_search_rejections",
            "Searches refused at once because the bulkhead was full",
            registry=registry,
        )
        self.cache_hits = Counter(
            "herald_ingest_search_cache_hits", "Searches answered from the cache", registry=registry
        )
        self.cache_invalidations = Counter(
            "herald_ingest_search_cache_invalidations",
            "Cached pages dropped because a processed batch changed their window",
            registry=registry,
        )


def _plan_out(row: Row) -> dict[str, Any]:
    # The pool's sessions run in UTC, so both times arrive in UTC: one isoformat() each,
    # cut at the "T", gives the date and the time (with microseconds only when present).
    starts, ends = row["starts_at"].isoformat(), row["ends_at"].isoformat()
    low, high = row["min_price"], row["max_price"]
    return {
        "id": f"{row['provider']}:{row['base_plan_id']}:{row['plan_id']}",
        "provider": row["provider"],
        "base_plan_id": row["base_plan_id"],
        "plan_id": row["plan_id"],
        "title": row["title"],
        "start_date": starts[:10],
        "start_time": starts[11:-6],
        "end_date": ends[:10],
        "end_time": ends[11:-6],
        "min_price": None if low is None else str(low),
        "max_price": None if high is None else str(high),
    }


class SearchService:
    """One per API process: its pool, bulkhead, cache and invalidation listener."""

    def __init__(
        self, info: str, schema: str, settings: SearchSettings, registry: CollectorRegistry
    ) -> None:
        params = conninfo_to_dict(info)
        options = (
            f"{params.get('options') or ''} -c statement_timeout={settings.statement_timeout_ms}"
            " -c TimeZone=UTC"
        )
        params["options"] = options.strip()
        timed = make_conninfo("", **params)
        self.schema = schema
        self.settings = settings
        self.bulkhead = Bulkhead(settings.max_concurrent)
        self.cache = PageCache(settings.cache_entries, settings.cache_ttl)
        self.metrics = SearchMetrics(registry)
        # No connection is held until a search needs one (min_size 0), and the cache's
        # listener starts with the first search: an API that never searches costs
        # the database nothing.
        # A tenant pool: each search acts for the request's tenant (row-level security).
        self.pool: AsyncConnectionPool[AsyncConn] = TenantPool(
            timed,
            min_size=0,
            max_size=settings.max_concurrent,
            kwargs={"autocommit": True, "row_factory": dict_row},
            connection_class=psycopg.AsyncConnection[Row],
            open=False,
            name="herald-search",
            timeout=settings.acquire_timeout,
        )
        self._listener: asyncio.Task[None] | None = None
        self._info = info

    async def open(self) -> None:
        await self.pool.open(wait=False)

    def _start_listening(self) -> None:
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen())

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self.pool.close()

    async def _listen(self) -> None:
        """Drop cached pages as batches change plans; on a lost connection, clear all."""
        while True:
            try:
                conn = await connect(self._info)
                async with conn:
                    await conn.execute(sql.query_with_identifiers("listen", channel=CHANNEL))
                    self.cache.invalidate(None, None)  # changes missed while away
                    async for note in conn.notifies():
                        self._on_change(note.payload)
            except (psycopg.Error, OSError) as exc:
                log.warning("search cache listener lost its connection (%s); retrying", exc)
                self.cache.invalidate(None, None)
                await asyncio.sleep(1.0)

    def _on_change(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            if data.get("schema") != self.schema:
                return
            lo = dt.datetime.fromisoformat(data["from"]) if data.get("from") else None
            hi = dt.datetime.fromisoformat(data["to"]) if data.get("to") else None
        except (ValueError, TypeError, KeyError):
            lo = hi = None
        dropped = self.cache.invalidate(lo, hi)
        if dropped:
            self.metrics.cache_invalidations.inc(dropped)

    def limit_of(self, limit: int | None) -> int:
        chosen = self.settings.default_limit if limit is None else limit
        if not 1 <= chosen <= self.settings.max_limit:
            raise BadSearch(f"limit must be between 1 and {self.settings.max_limit}")
        return chosen

    async def search(
        self, window: Window, cursor: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """One page: ``{"items": [...], "next_cursor": str | None}``."""
        started = time.perf_counter()
        self._start_listening()
        size = self.limit_of(limit)
        after = decode_cursor(window, cursor) if cursor else None
        if after is None:
            cached = self.cache.get(window, size)
            if cached is not None:
                self.metrics.cache_hits.inc()
                self.metrics.latency.labels("cached").observe(time.perf_counter() - started)
                return dict(cached)
        if not self.bulkhead.try_enter():
            self.metrics.rejections.inc()
            self.metrics.latency.labels("rejected").observe(time.perf_counter() - started)
            raise SearchSaturated(f"{self.bulkhead.limit} searches are running; try again shortly")
        try:
            rows = await self._query(window, after, size)
        except (psycopg.Error, OSError) as exc:
            self.metrics.latency.labels("unavailable").observe(time.perf_counter() - started)
            raise SearchUnavailable(f"the database could not answer the search ({exc})") from None
        finally:
            self.bulkhead.leave()
        page = {
            "items": [_plan_out(r) for r in rows[:size]],
            "next_cursor": (
                encode_cursor(window, rows[size - 1]["starts_at"], rows[size - 1]["id"])
                if len(rows) > size
                else None
            ),
        }
        if after is None and page["items"]:
            self.cache.put(window, size, page)
        self.metrics.latency.labels("ok").observe(time.perf_counter() - started)
        return page

    async def _query(
        self, window: Window, after: tuple[dt.datetime, int] | None, size: int
    ) -> list[Row]:
        # A first page starts at the window (the statement takes the later bound anyway).
        start, plan_id = after if after is not None else (window.starts_at, 0)
        params = {
            "window_from": window.starts_at,
            "window_to": window.ends_at,
            "after_start": start,
            "after_id": plan_id,
            "limit": size + 1,
        }
        conn: AsyncConn
        async with self.pool.connection(timeout=self.settings.acquire_timeout) as conn:
            cur = await conn.execute(sql.query("ingest_search"), params)
            return await cur.fetchall()
